/**
 * Daemon and CLI build the same answer when a directory source keeps serving a certificate its file no longer
 * holds (issue 21, item 4). A running daemon, then a fresh `status --json` and `plan --json`, then the daemon
 * again after a restart, over one real HAProxy: after a bad-key file replaced a good one, and after a file that
 * expires earlier (80 days for 300) replaced it, every view keeps the last valid certificate as the desired one
 * (in sync, nothing to push) and reports the file as a problem of that certificate. Before the source kept what
 * it served in the state store, the fresh CLI showed the certificate gone (unmanaged on HAProxy) after the bad
 * key, and `plan` planned to push the 80-day certificate the daemon refused.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial as normal } from "../../src/certificates/names.js";
import type { StatusDocument } from "../../src/metrics/status-view.js";
import type { CycleReport } from "../../src/reconcile/report.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { certificatee, type Daemon, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { scaled } from "../harness/deadline.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { stopReloadSafe } from "../harness/invariant.js";
import { freePorts } from "../harness/ports.js";
import { parseScrape } from "../harness/scrape.js";
import { servedSerial } from "../harness/targets.js";

const DAY = 86_400_000;
let dir: string;
let h: Haproxy;
let daemon: Daemon | undefined;
let listen: string;
let config: string;
let ca: TestIssuer;
let good: TestLeaf;
let shorter: TestLeaf;

const sourceFile = () => join(dir, "source", "shop.pem");

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-held-"));
	ca = await createTestCa("held certificate CA");
	good = await issueTestLeaf(ca, { names: ["shop.test"], notAfter: new Date(Date.now() + 300 * DAY) });
	h = await startHaproxy({ crtDir: { "shop.pem": good.combinedPem } });
	const [metricsPort] = (await freePorts(1)) as [number];
	listen = `127.0.0.1:${metricsPort}`;
	mkdirSync(join(dir, "source"));
	writeFileSync(sourceFile(), good.combinedPem, { mode: 0o600 });
	config = join(dir, "certificatee.yaml");
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: join(dir, "state"),
			interval: "1s",
			listen,
			sources: [{ name: "files", type: "directory", path: join(dir, "source"), debounce: "100ms" }],
			targets: [
				{ name: "lb1", type: "haproxy-runtime", socket: h.adminSocket, crt_dir: h.crtDir, probe: h.address },
			],
		}),
	);
}, 30_000);

afterAll(async () => {
	await daemon?.stop();
	rmSync(dir, { recursive: true, force: true });
	// Last: a failed check must not skip the rest of the cleanup.
	await stopReloadSafe(h);
});

/** What every view must agree on: each certificate (serial, convergence, its problems) and each endpoint. */
function verdict(doc: StatusDocument) {
	return {
		certificates: doc.summary.certificates.map((c) => {
			const t = c.targets.find((x) => x.target === "lb1");
			const problems = (c.problems ?? []).map((p) => `${p.code} ${p.file}`);
			return `${c.name} ${c.serial} ${t?.converged}/${t?.total} [${problems.join(", ")}]`;
		}),
		endpoints: doc.summary.endpoints.map((e) => `${e.endpoint} ${e.state}`),
		// The harness's HAProxy has a default certificate of its own.
		unmanaged: doc.summary.unmanaged.map((u) => u.ref).filter((r) => !r.endsWith("/default.pem")),
	};
}

async function daemonStatus(): Promise<StatusDocument> {
	return (await (await fetch(`http://${listen}/status.json`)).json()) as StatusDocument;
}

/** The daemon's /status.json once `ok` holds of it (it picks a file change up within the source's debounce). */
async function daemonStatusWhen(what: string, ok: (doc: StatusDocument) => boolean): Promise<StatusDocument> {
	const deadline = Date.now() + scaled(30_000);
	let last: StatusDocument | undefined;
	for (;;) {
		try {
			last = await daemonStatus();
			if (ok(last)) return last;
		} catch {
			// Not listening yet.
		}
		if (Date.now() > deadline)
			throw new Error(`daemon never showed ${what}: ${JSON.stringify(last?.summary)}`);
		await new Promise((r) => setTimeout(r, 50));
	}
}

const hasProblem = (code: string) => (doc: StatusDocument) =>
	doc.summary.certificates.some((c) => c.name === "shop" && c.problems?.some((p) => p.code === code));

async function cliStatus(): Promise<StatusDocument> {
	const status = await certificatee(["--json", "status", "--config", config]);
	expect(status.code, status.stderr).toBe(0);
	return JSON.parse(status.stdout) as StatusDocument;
}

async function cliPlan(): Promise<{ code: number; report: CycleReport }> {
	const plan = await certificatee(["--json", "plan", "--config", config]);
	return { code: plan.code, report: JSON.parse(plan.stdout) as CycleReport };
}

async function restartDaemon(): Promise<void> {
	await daemon?.stop();
	daemon = spawnCertificatee(["run", "--config", config]);
	await daemon.waitForLog(/^cycle finished$/, { timeoutMs: scaled(30_000) });
}

/** The daemon, a fresh status and plan, the daemon after a restart: one answer, naming `code` on shop's file. */
async function everyViewKeeps(code: string): Promise<void> {
	const expected = {
		certificates: [`shop ${good.serial} 1/1 [${code} ${sourceFile()}]`],
		endpoints: ["lb1 converged"],
		unmanaged: [],
	};
	const running = await daemonStatusWhen(code, hasProblem(code));
	expect(verdict(running)).toEqual(expected);
	const problem = running.summary.certificates[0]?.problems?.[0];
	expect(problem?.hint).toContain(`serial ${good.serial}`);
	expect(problem?.hint).toContain("removing the file removes the certificate");
	const page = await (await fetch(`http://${listen}/`)).text();
	expect(page).toMatch(new RegExp(`<tr data-certificate="shop">[^\n]*?data-problem="${code}"`));
	const metrics = parseScrape(await (await fetch(`http://${listen}/metrics`)).text());
	expect(metrics.get(`certificatee_certificate_source_problems{certificate="shop"}`)).toBe(1);
	expect(metrics.get(`certificatee_certificate_endpoints_converged{certificate="shop",target="lb1"}`)).toBe(
		1,
	);

	expect(verdict(await cliStatus())).toEqual(expected);
	const plan = await cliPlan();
	// The file's problem is a failure (exit 1), but nothing is pushed: the certificate served stays desired.
	expect(plan.code).toBe(1);
	expect(plan.report.certificates.map((c) => `${c.name} ${c.serial}`)).toEqual([`shop ${good.serial}`]);
	expect(plan.report.targets.flatMap((t) => t.endpoints.flatMap((e) => e.steps))).toEqual([]);
	expect(plan.report.sourceProblems.map((p) => `${p.certificate} ${p.code}`)).toEqual([`shop ${code}`]);

	await restartDaemon();
	expect(verdict(await daemonStatusWhen(code, hasProblem(code)))).toEqual(expected);
}

describe("a directory source's held certificate: the daemon and a fresh CLI agree", () => {
	it("after a bad-key file replaced a good one, every view keeps the last valid certificate", async () => {
		daemon = spawnCertificatee(["run", "--config", config]);
		await daemonStatusWhen("shop converged", (d) => verdict(d).endpoints[0] === "lb1 converged");
		const other = await issueTestLeaf(ca, { names: ["other.test"] });
		writeFileSync(sourceFile(), `${good.certPem}${other.keyPem}`, { mode: 0o600 });
		await everyViewKeeps("BUNDLE_KEY_MISMATCH");
	}, 120_000);

	it("after an 80-day file replaced the 300-day one, no view pushes it", async () => {
		shorter = await issueTestLeaf(ca, {
			names: ["shop.test"],
			notAfter: new Date(Date.now() + 80 * DAY),
		});
		writeFileSync(sourceFile(), shorter.combinedPem, { mode: 0o600 });
		await everyViewKeeps("SOURCE_OLDER");
	}, 120_000);

	it("certificatee replace, with the daemon running: the 80-day certificate is served, audited, shown, and stays after a restart", async () => {
		const refused = await certificatee(["replace", "shop", "--config", config]);
		expect(refused.code).toBe(1);
		expect(refused.stderr).toContain("--reason is required");

		const from = daemon?.logs.length ?? 0;
		const replace = await certificatee([
			"replace",
			"shop",
			"--reason",
			"key compromise, ticket 4711",
			"--wait",
			"60s",
			"--config",
			config,
		]);
		expect(replace.code, replace.stderr).toBe(0);
		expect(replace.stdout).toContain(`shop: serial ${shorter.serial} served at`);
		const audit = await (daemon as Daemon).waitForLog(/^deliberate replacement recorded$/, { from });
		expect(audit).toMatchObject({
			audit: "replacement",
			certificate: "shop",
			reason: "key compromise, ticket 4711",
			oldSerial: good.serial,
			newSerial: shorter.serial,
			file: sourceFile(),
		});
		expect(String(audit.by)).toMatch(/.+@.+/);
		expect(normal(await servedSerial(h, "shop.test"))).toBe(normal(shorter.serial));

		const expected = {
			certificates: [`shop ${shorter.serial} 1/1 []`],
			endpoints: ["lb1 converged"],
			unmanaged: [],
		};
		const running = await daemonStatus();
		expect(verdict(running)).toEqual(expected);
		expect(running.summary.certificates[0]?.replacement).toMatchObject({
			reason: "key compromise, ticket 4711",
			replaces: { serial: good.serial },
		});
		expect(await (await fetch(`http://${listen}/`)).text()).toMatch(
			/<tr data-certificate="shop">[^\n]*?data-replacement>deliberate replacement by [^<]+: key compromise, ticket 4711/,
		);
		const status = await certificatee(["status", "--config", config]);
		expect(status.stdout).toContain(`shop: deliberate replacement of serial ${good.serial}`);
		expect(verdict(await cliStatus())).toEqual(expected);
		const plan = await cliPlan();
		expect(plan.code).toBe(0);

		await restartDaemon();
		expect(verdict(await daemonStatus())).toEqual(expected);
		expect(normal(await servedSerial(h, "shop.test"))).toBe(normal(shorter.serial));
	}, 120_000);
});
