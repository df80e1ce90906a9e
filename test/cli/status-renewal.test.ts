/**
 * `certificatee status` for certificates certificatee issues but cannot get: never issued, backing off after a
 * failed order, and blocked by the daily order cap (a local CA whose certificates are due at once). The ACME server is a closed port (nothing listens), the
 * target a real directory; the CLI runs as a child process. Text and JSON must both say what is wrong,
 * the last error and when the next attempt is.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusSummary } from "../../src/metrics/status-view.js";
import type { CycleReport } from "../../src/reconcile/report.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { freePorts } from "../harness/ports.js";

let dir: string;
let closedPort: number;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-status-renewal-"));
	[closedPort] = (await freePorts(1)) as [number];
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configFile(name: string): string {
	const out = join(dir, name, "out");
	mkdirSync(out, { recursive: true });
	const config = {
		state_dir: join(dir, name, "state"),
		sources: [
			{ name: "le", type: "acme", directory_url: `http://127.0.0.1:${closedPort}/dir`, http_retries: 0 },
		],
		certificates: [{ name: "web", domains: ["web.test", "www.web.test"], issuer: "le" }],
		targets: [{ name: "files", type: "directory", path: out, layout: "kubernetes-tls" }],
	};
	const file = join(dir, name, "certificatee.yaml");
	writeFileSync(file, JSON.stringify(config, null, 2));
	return file;
}

async function status(config: string): Promise<{ text: string; summary: StatusSummary }> {
	const text = await certificatee(["status", "--config", config]);
	expect(text.code, text.stderr).toBe(0);
	const json = await certificatee(["--json", "status", "--config", config]);
	expect(json.code, json.stderr).toBe(0);
	return { text: text.stdout, summary: (JSON.parse(json.stdout) as { summary: StatusSummary }).summary };
}

const row = (text: string, name: string) => text.split("\n").find((l) => l.startsWith(`${name} `)) ?? "";

describe("status of issued certificates that are not there (ACME server unreachable)", () => {
	it("never issued: a row with its names, state due, 0/1 with the reason", async () => {
		const { text, summary } = await status(configFile("fresh"));
		expect(row(text, "web")).toMatch(/^web\s+web\.test,www\.web\.test\s+not issued\s+-\s+\S+\s+due\s+0\/1$/);
		// A directory target's endpoint is its path.
		expect(text).toContain(`web on files/${join(dir, "fresh", "out")}: not issued yet`);
		const web = summary.certificates.find((c) => c.name === "web");
		expect(web).toMatchObject({
			names: ["web.test", "www.web.test"],
			issuer: "le",
			state: "due",
			targets: [
				{
					target: "files",
					converged: 0,
					total: 1,
					reasons: [`${join(dir, "fresh", "out")}: not issued yet`],
				},
			],
		});
		expect(web?.lastError).toBeUndefined();
	});

	it("after a failed order: backing off until T, the last error's code and message, the next attempt", async () => {
		const config = configFile("backoff");
		const sync = await certificatee(["sync", "--once", "--config", config]);
		expect(sync.code).toBe(1);
		const { text, summary } = await status(config);
		const web = summary.certificates.find((c) => c.name === "web");
		expect(web?.state).toBe("backing-off");
		expect(web?.lastError?.code).toBe("ACME_ERROR");
		expect(web?.lastError?.message).toContain("ECONNREFUSED");
		const next = Date.parse(web?.nextAttempt ?? "");
		// The first backoff is one minute.
		expect(next - Date.now()).toBeGreaterThan(0);
		expect(next - Date.now()).toBeLessThanOrEqual(60_000);
		expect(web?.stateText).toBe(`backing off until ${web?.nextAttempt}`);
		expect(row(text, "web")).toMatch(/\sbacking-off\s+0\/1$/);
		expect(text).toContain(`web: backing off until ${web?.nextAttempt}`);
		expect(text).toMatch(/^ {2}last error ACME_ERROR: .*ECONNREFUSED/m);
		expect(text).toContain(`  next attempt ${web?.nextAttempt}`);
	});

	it("the daily order cap reached (it counts successful orders): blocked by the daily cap until T", async () => {
		// A local CA whose certificates are due as soon as issued, and a cap of one order a day.
		const out = join(dir, "capped", "out");
		mkdirSync(out, { recursive: true });
		const config = join(dir, "capped", "certificatee.yaml");
		writeFileSync(
			config,
			JSON.stringify({
				state_dir: join(dir, "capped", "state"),
				sources: [{ name: "internal", type: "local-ca", ca_common_name: "Cap Test CA" }],
				certificates: [
					{ name: "web", domains: ["web.test"], issuer: "internal", lifetime: "90s", renew_before: "90s" },
				],
				renewal: { max_orders_per_day: 1 },
				targets: [{ name: "files", type: "directory", path: out, layout: "kubernetes-tls" }],
			}),
		);
		const first = await certificatee(["--json", "sync", "--once", "--config", config]);
		// Issued and written: one write, done.
		const issued = JSON.parse(first.stdout) as CycleReport;
		const steps = issued.targets.flatMap((t) => t.endpoints.flatMap((e) => e.steps));
		expect(
			steps.map((s) => `${s.op} ${s.result}`),
			first.stderr,
		).toEqual(["directory-write ok"]);
		// Due again at the renewal time the cycle drew (its jitter: at most a third of the 90 s window): wait until
		// then, not for the longest jitter. A jitter short enough to be past already has it capped at once. The
		// 90 s lifetime leaves at least 60 s after that for the three CLI runs below: a loaded machine (8-10 s per
		// run at a load of 25) must not see the certificate expire first (a source problem, not the cap).
		const renewal = issued.renewals?.find((r) => r.certificate === "web");
		expect(renewal?.state).toMatch(/^(issued|capped)$/);
		if (renewal?.state === "issued") {
			const due = Date.parse(renewal.nextAttemptAt ?? "");
			expect(due - Date.now()).toBeLessThanOrEqual(30_000);
			while (Date.now() <= due) await new Promise((r) => setTimeout(r, Math.min(200, due - Date.now() + 1)));
		}
		const sync = await certificatee(["sync", "--once", "--config", config]);
		expect(sync.code).toBe(1);
		const { text, summary } = await status(config);
		const web = summary.certificates.find((c) => c.name === "web");
		expect(web?.state).toBe("capped");
		// The cap reopens 24 h after the successful order.
		const reopen = Date.parse(web?.nextAttempt ?? "") - Date.now();
		expect(reopen).toBeGreaterThan(23 * 3_600_000);
		expect(reopen).toBeLessThanOrEqual(24 * 3_600_000);
		expect(text).toContain(`web: blocked by the daily cap until ${web?.nextAttempt}`);
		// plan says it too, and exits 1: nothing can converge until the cap reopens.
		const plan = await certificatee(["plan", "--config", config]);
		expect(plan.code).toBe(1);
		expect(plan.stdout).toMatch(/^order web from internal blocked by the daily cap until /m);
		expect(plan.stdout.trimEnd().split("\n").at(-1)).toMatch(/^not converged: 1 failed order/);
		// Five CLI runs and a wait of at most 30 s: each run starts Node and loads the CLI (1–2 s of CPU on 2 cores).
	}, 150_000);
});
