/**
 * The metrics listener on a real loopback socket (port from the OS): / is the fleet page with a policy that
 * allows only its own inline parts, /status.json is the status document byte for byte as JSON, and both say
 * so plainly before the first cycle.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../../../src/metrics/index.js";
import { type HealthServer, startHealthServer } from "../../../src/metrics/server.js";
import type { StatusDocument } from "../../../src/metrics/status-view.js";
import { fixture } from "./fixture.js";

let server: HealthServer;
let current: StatusDocument | undefined;

beforeAll(async () => {
	server = await startHealthServer(
		"127.0.0.1:0",
		createMetrics(),
		() => ({ intervalMs: 4_000, startedAt: Date.now(), configLoaded: true }),
		() => current,
	);
});

afterAll(async () => {
	await server?.close();
});

const get = (path: string, method = "GET") => fetch(`http://${server.address}${path}`, { method });

describe("the fleet page over HTTP", () => {
	it("before the first cycle: / says it is waiting, /status.json answers 503 with why", async () => {
		current = undefined;
		const page = await get("/");
		expect(page.status).toBe(200);
		expect(await page.text()).toContain("Waiting for the first cycle");
		const json = await get("/status.json");
		expect(json.status).toBe(503);
		expect(await json.json()).toEqual({ error: "no cycle has finished yet; try again shortly" });
	});

	it("/status.json is the status document; / renders it, with no-store and a strict policy", async () => {
		current = fixture();
		const json = await get("/status.json");
		expect(json.status).toBe(200);
		expect(json.headers.get("content-type")).toBe("application/json");
		expect(await json.json()).toEqual(JSON.parse(JSON.stringify(current)));

		const page = await get("/?from=test");
		expect(page.status).toBe(200);
		expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
		expect(page.headers.get("cache-control")).toBe("no-store");
		const csp = page.headers.get("content-security-policy") ?? "";
		expect(csp).toMatch(
			/^default-src 'none'; style-src 'sha256-[^']+'; script-src 'sha256-[^']+'; connect-src 'self'/,
		);
		const body = await page.text();
		expect(body).toContain(`<main data-cycle="${current.startedAt}">`);
		// The refresh follows the interval (4 s here).
		expect(body).toContain('<body data-refresh="4">');
		expect(body).toMatch(/data-stat="endpoints">1\/2</);
	});

	it("HEAD / has headers and no body; other methods 405; unknown paths list the ones that exist", async () => {
		const head = await get("/", "HEAD");
		expect(head.status).toBe(200);
		expect(await head.text()).toBe("");
		expect((await get("/", "POST")).status).toBe(405);
		const missing = await get("/nope");
		expect(missing.status).toBe(404);
		expect(await missing.text()).toContain("/status.json");
	});
});
