/**
 * A first rollout: a target lists a certificate certificatee has not issued yet. `plan` says pending (exit 2,
 * "due to be ordered"), never failed; a target that does not list it waits for nothing (0 of 0) in `status`.
 * The built CLI, a local-ca source, a directory source and two directory targets on real files.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";

let dir: string;
let config: string;

interface Summary {
	certificates: Array<{ name: string; targets: Array<{ target: string; converged: number; total: number }> }>;
	endpoints: Array<{ target: string; state: string; reason?: string }>;
}

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-awaited-"));
	mkdirSync(join(dir, "source"));
	const ca = await createTestCa("awaited CA");
	const shop = await issueTestLeaf(ca, { names: ["shop.test"] });
	writeFileSync(join(dir, "source", "shop.pem"), shop.combinedPem, { mode: 0o600 });
	config = join(dir, "certificatee.yaml");
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: join(dir, "state"),
			sources: [
				{ name: "files", type: "directory", path: join(dir, "source") },
				{ name: "internal", type: "local-ca", ca_common_name: "Awaited Test CA" },
			],
			certificates: [{ name: "web", domains: ["web.test"], issuer: "internal" }],
			targets: [
				{
					name: "one",
					type: "directory",
					path: join(dir, "one"),
					layout: "kubernetes-tls",
					certificates: ["web"],
				},
				{ name: "rest", type: "directory", path: join(dir, "rest"), certificates: ["shop"] },
			],
		}),
	);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a certificate not issued yet, listed by one target", () => {
	it("plan before the first order: pending (exit 2), no failed write; status: the other target waits for nothing", async () => {
		const plan = await certificatee(["plan", "-c", config]);
		expect(plan.stdout).not.toMatch(/failed/);
		expect(plan.stdout.trimEnd().split("\n").at(-1)).toMatch(/^not converged: .*pending/);
		expect(plan.code).toBe(2);

		const status = await certificatee(["--json", "status", "-c", config]);
		const { summary } = JSON.parse(status.stdout) as { summary: Summary };
		const web = summary.certificates.find((c) => c.name === "web");
		expect(web?.targets).toEqual([
			expect.objectContaining({ target: "one", converged: 0, total: 1 }),
			expect.objectContaining({ target: "rest", converged: 0, total: 0 }),
		]);
		const one = summary.endpoints.find((e) => e.target === "one");
		expect(one).toMatchObject({ state: "pending", reason: expect.stringContaining("web: not issued yet") });
		expect(summary.endpoints.find((e) => e.target === "rest")?.reason ?? "").not.toContain("web");
	});

	it("sync orders and writes it; plan then says converged (exit 0)", async () => {
		const sync = await certificatee(["sync", "--once", "-c", config]);
		expect(sync.code).toBe(0);
		expect(existsSync(join(dir, "one", "tls.crt"))).toBe(true);
		const plan = await certificatee(["plan", "-c", config]);
		expect(plan.code).toBe(0);
	});
});
