/**
 * A failed on_change hook is retried every cycle until it succeeds, and remembered across processes (each
 * `sync --once` is a new process): first sync writes the files and the hook fails; the next syncs change no
 * file but run the hook again; once it succeeds it is not run again until the files change.
 */
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certificatee, ensureBuilt } from "../harness/cli.js";

let dir: string;
let configFile: string;
const calls = () =>
	existsSync(join(dir, "calls")) ? readFileSync(join(dir, "calls"), "utf8").trim().split("\n") : [];

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-hook-retry-"));
	const hook = join(dir, "hook.sh");
	writeFileSync(
		hook,
		`#!/bin/sh\necho "$CERTIFICATEE_CERTIFICATE" >> ${join(dir, "calls")}\n[ -e ${join(dir, "fixed")} ] || { echo "reload refused" >&2; exit 3; }\n`,
		{ mode: 0o755 },
	);
	const config = {
		state_dir: join(dir, "state"),
		sources: [{ name: "internal", type: "local-ca", ca_common_name: "Hook Retry Test CA" }],
		certificates: [{ name: "web", domains: ["web.test"], issuer: "internal" }],
		targets: [
			{
				name: "files",
				type: "directory",
				path: join(dir, "out"),
				layout: "haproxy-pem",
				on_change: { command: [hook] },
			},
		],
	};
	configFile = join(dir, "certificatee.yaml");
	writeFileSync(configFile, JSON.stringify(config, null, 2));
}, 30_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sync = () => certificatee(["sync", "--once", "--json", "--config", configFile]);

describe("a failed on_change hook", () => {
	it("fails with the files written, is retried by the next processes, then stops once it succeeded", async () => {
		const first = await sync();
		expect(first.code, first.stderr).toBe(1);
		expect(first.stdout + first.stderr).toContain("HOOK_FAILED");
		expect(calls()).toEqual(["web"]);
		const pem = readFileSync(join(dir, "out", "web.pem"), "utf8");

		const second = await sync();
		expect(second.code, second.stderr).toBe(1);
		expect(calls()).toEqual(["web", "web"]);
		expect(readFileSync(join(dir, "out", "web.pem"), "utf8")).toBe(pem);

		appendFileSync(join(dir, "fixed"), "");
		const third = await sync();
		expect(third.code, third.stdout + third.stderr).toBe(0);
		expect(calls()).toEqual(["web", "web", "web"]);

		const fourth = await sync();
		expect(fourth.code).toBe(0);
		expect(calls()).toHaveLength(3);
	}, 60_000);
});
