/**
 * Issue 25, finding 11 (the rest): the fleet page is rendered once per cycle, not per request, and with
 * `listen_token` (from `listen_token_file`) the page, /status.json and /metrics need the token while the
 * probes (/healthz, /readyz) stay open. A real listener on loopback.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { createMetrics } from "../../src/metrics/index.js";
import { type HealthServer, startHealthServer } from "../../src/metrics/server.js";
import type { StatusDocument } from "../../src/metrics/status-view.js";
import { failure } from "../harness/failure.js";
import { fixture } from "./page/fixture.js";

const TOKEN = "b7e1c0d5a9f2e4c3b1a0d9e8f7c6b5a4";
let open: HealthServer;
let guarded: HealthServer;
let token: string | undefined = TOKEN;
let current: StatusDocument | undefined;
let dir: string;

const health = () => ({ intervalMs: 4_000, startedAt: Date.now(), configLoaded: true });

beforeAll(async () => {
	open = await startHealthServer("127.0.0.1:0", createMetrics(), health, () => current);
	guarded = await startHealthServer("127.0.0.1:0", createMetrics(), health, () => current, {
		token: () => token,
	});
	dir = await mkdtemp(join(tmpdir(), "certificatee-listener-auth-"));
});

afterAll(async () => {
	await open?.close();
	await guarded?.close();
	await rm(dir, { recursive: true, force: true });
});

const get = (server: HealthServer, path: string, authorization?: string) =>
	fetch(`http://${server.address}${path}`, authorization ? { headers: { authorization } } : {});

/** Waits (on the clock, not a fixed time) until the millisecond changes, so a new render would differ. */
async function nextMillisecond(): Promise<void> {
	const start = Date.now();
	while (Date.now() === start) await new Promise((r) => setImmediate(r));
}

describe("the fleet page is rendered per cycle", () => {
	it("two requests within one cycle get the same page (rendered once); a new cycle renders anew", async () => {
		current = fixture();
		const first = await (await get(open, "/")).text();
		await nextMillisecond();
		const second = await (await get(open, "/")).text();
		expect(second).toBe(first);
		current = fixture();
		await nextMillisecond();
		const third = await (await get(open, "/")).text();
		expect(third).not.toBe(first);
		expect(third.replace(/page rendered [^<]*/, "")).toBe(first.replace(/page rendered [^<]*/, ""));
	});
});

describe("listen_token", () => {
	it("without the token: the page, /status.json and /metrics answer 401 (asking for Basic), the probes answer", async () => {
		current = fixture();
		for (const path of ["/", "/index.html", "/status.json", "/metrics", "/nothing"]) {
			const res = await get(guarded, path);
			expect(res.status, path).toBe(401);
			expect(res.headers.get("www-authenticate")).toBe('Basic realm="certificatee", charset="UTF-8"');
			const body = await res.text();
			expect(body).toMatch(/needs its token \(listen_token_file\)/);
			expect(body).not.toContain(TOKEN);
			expect((await get(guarded, path, `Bearer ${TOKEN.slice(0, -1)}x`)).status, path).toBe(401);
			expect(
				(await get(guarded, path, `Basic ${Buffer.from(`u:${TOKEN}x`).toString("base64")}`)).status,
			).toBe(401);
		}
		expect((await get(guarded, "/healthz")).status).toBe(200);
		const ready = await get(guarded, "/readyz");
		expect(ready.status).not.toBe(401);
		// The probe gets its answer; the details (endpoint names and errors) need the token.
		expect(Object.keys(await ready.json()).sort()).toEqual(["ready", "reason"]);
		const detailed = await (await get(guarded, "/readyz", `Bearer ${TOKEN}`)).json();
		expect(detailed).toHaveProperty("failedEndpoints");
	});

	it("with the token, as Bearer or as the password of Basic (a browser): everything answers", async () => {
		current = fixture();
		const basic = `Basic ${Buffer.from(`anyone:${TOKEN}`).toString("base64")}`;
		for (const auth of [`Bearer ${TOKEN}`, basic]) {
			expect((await get(guarded, "/", auth)).status).toBe(200);
			expect(await (await get(guarded, "/status.json", auth)).json()).toEqual(
				JSON.parse(JSON.stringify(current)),
			);
			expect((await get(guarded, "/metrics", auth)).status).toBe(200);
		}
		// Read per request: a reloaded configuration without the token opens the listener again.
		token = undefined;
		expect((await get(guarded, "/status.json")).status).toBe(200);
		token = TOKEN;
	});

	it("listen_token_file is read like the other secret files; a short token is refused", async () => {
		const file = join(dir, "listen-token");
		await writeFile(file, `${TOKEN}\n`, { mode: 0o600 });
		const loaded = parseConfig({ listen_token_file: file }, join(dir, "c.yaml"), { env: {} });
		expect(loaded.config.listen_token).toBe(TOKEN);
		const short = await failure(
			Promise.resolve().then(() => parseConfig({ listen_token: "short" }, join(dir, "c.yaml"), { env: {} })),
		);
		expect(short.message).toMatch(/listen_token must be at least 16 characters/);
	});
});
