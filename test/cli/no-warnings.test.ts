/**
 * The JSON log stays JSON: with many certificates probed at once on one endpoint, `plan`, `sync` and `status`
 * print no Node.js warning (MaxListenersExceededWarning: every probe listens on the cycle's abort signal).
 * The built CLI against two real HAProxy processes: two runtime socket targets and a Data Plane API target, probes on.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type DpapiDouble, startDpapiDouble } from "../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";

let dir: string;
let h: Haproxy;
let h2: Haproxy;
let d: DpapiDouble;
let config: string;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-no-warnings-"));
	const ca = await createTestCa("no warnings CA");
	h = await startHaproxy();
	h2 = await startHaproxy();
	d = await startDpapiDouble({ haproxy: h2 });
	const source = join(dir, "source");
	mkdirSync(source);
	for (let i = 0; i < 6; i++) {
		const leaf = await issueTestLeaf(ca, { names: [`n${i}.test`, `www.n${i}.test`] });
		writeFileSync(join(source, `n${i}.pem`), leaf.combinedPem, { mode: 0o600 });
	}
	config = join(dir, "certificatee.yaml");
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: join(dir, "state"),
			sources: [{ name: "files", type: "directory", path: source }],
			targets: [
				{ name: "lb1", type: "haproxy-runtime", socket: h.adminSocket, crt_dir: h.crtDir, probe: h.address },
				{
					name: "lb2",
					type: "haproxy-runtime",
					socket: h2.adminSocket,
					crt_dir: h2.crtDir,
					probe: h2.address,
				},
			],
		}),
	);
}, 60_000);

afterAll(async () => {
	await d?.close();
	await h2?.stop();
	await h?.stop();
	rmSync(dir, { recursive: true, force: true });
});

describe("no Node.js warnings in the log", () => {
	it.each([["plan"], ["sync"], ["status"]])(
		"%s with 6 certificates (12 names probed)",
		async (command) => {
			const r = await certificatee([command, "--config", config], { timeoutMs: 60_000 });
			expect(r.code, r.stdout + r.stderr).toBeLessThanOrEqual(2);
			expect(r.stderr).not.toMatch(/Warning|--trace-warnings/);
			for (const line of r.stderr.split("\n").filter((l) => l.trim() !== ""))
				expect(() => JSON.parse(line), line).not.toThrow();
		},
		60_000,
	);
});
