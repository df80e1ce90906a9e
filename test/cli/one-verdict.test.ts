/**
 * One verdict everywhere: the built CLI's `plan`, `sync --once` and `status --json`, and a running daemon's
 * /status.json, fleet page and /metrics, over one real HAProxy with a certificate in sync from a directory
 * source beside one certificatee cannot issue (its ACME server is a closed port). Every view must say the same
 * of the endpoint and of each certificate: the endpoint is not converged while a certificate it should serve
 * is not issued (the fleet page's header said "1/1 endpoints converged" in green beside that row's red 0/1).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusDocument } from "../../src/metrics/status-view.js";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, type Daemon, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { stopReloadSafe } from "../harness/invariant.js";
import { freePorts } from "../harness/ports.js";
import { parseScrape } from "../harness/scrape.js";

let dir: string;
let h: Haproxy;
let daemon: Daemon | undefined;
let listen: string;
let config: string;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-one-verdict-"));
	const ca = await createTestCa("one verdict CA");
	const shop = await issueTestLeaf(ca, { names: ["shop.test"] });
	h = await startHaproxy({ crtDir: { "shop.pem": shop.combinedPem } });
	const [metricsPort, closedPort] = (await freePorts(2)) as [number, number];
	listen = `127.0.0.1:${metricsPort}`;
	mkdirSync(join(dir, "source"));
	writeFileSync(join(dir, "source", "shop.pem"), shop.combinedPem, { mode: 0o600 });
	config = join(dir, "certificatee.yaml");
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: join(dir, "state"),
			interval: "1s",
			listen,
			sources: [
				{ name: "files", type: "directory", path: join(dir, "source") },
				{ name: "le", type: "acme", directory_url: `http://127.0.0.1:${closedPort}/dir`, http_retries: 0 },
			],
			certificates: [{ name: "web", domains: ["web.test"], issuer: "le" }],
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

const lastLine = (stdout: string) => stdout.trimEnd().split("\n").at(-1) ?? "";

/** What a status document says of the endpoint and of each certificate on lb1. */
function verdicts(doc: StatusDocument) {
	return {
		endpoints: doc.summary.endpoints.map((e) => `${e.endpoint} ${e.state}`),
		certificates: doc.summary.certificates.map((c) => {
			const t = c.targets.find((x) => x.target === "lb1");
			return `${c.name} ${t?.converged}/${t?.total}`;
		}),
	};
}

const EXPECTED = { endpoints: ["lb1 pending"], certificates: ["shop 1/1", "web 0/1"] };

describe("plan, sync, status, /status.json, the fleet page and the metrics: one verdict", () => {
	it("the CLI: plan (pending) and sync (a failed order) are not converged (0/1 endpoints), status --json says why", async () => {
		// Never ordered yet: due, so pending; the endpoint waits for it.
		const plan = await certificatee(["plan", "--config", config]);
		expect(plan.code, plan.stdout).toBe(2);
		expect(lastLine(plan.stdout)).toBe("not converged: 1 pending (0/1 endpoints converged)");
		const sync = await certificatee(["sync", "--once", "--config", config]);
		expect(sync.code, sync.stdout).toBe(1);
		expect(lastLine(sync.stdout)).toBe("not converged: 1 failed order (0/1 endpoints converged)");
		const status = await certificatee(["--json", "status", "--config", config]);
		expect(status.code, status.stderr).toBe(0);
		const doc = JSON.parse(status.stdout) as StatusDocument;
		expect(verdicts(doc)).toEqual(EXPECTED);
		expect(doc.summary.endpoints[0]?.reason).toMatch(/^web: not issued yet \((failing|backing-off)\)$/);
	});

	it("the daemon: /status.json, the fleet page's header and rows, and /metrics say the same", async () => {
		daemon = spawnCertificatee(["run", "--config", config]);
		await daemon.waitForLog(/^cycle finished$/, { timeoutMs: 30_000 });
		const doc = (await (await fetch(`http://${listen}/status.json`)).json()) as StatusDocument;
		expect(verdicts(doc)).toEqual(EXPECTED);

		const page = await (await fetch(`http://${listen}/`)).text();
		const header = /<div class="stat (\w+)"><span class="value" data-stat="endpoints">([^<]*)<\/span>/.exec(
			page,
		);
		expect(header?.slice(1)).toEqual(["bad", "0/1"]);
		const cell = (name: string) =>
			new RegExp(`<td class="conv (\\w+)" data-cert="${name}" data-target="lb1"[^>]*>([^<]*)</td>`)
				.exec(page)
				?.slice(1);
		expect(cell("shop")).toEqual(["good", "1/1"]);
		expect(cell("web")).toEqual(["bad", "0/1"]);
		expect(page).toMatch(/data-target-converged="lb1">0\/1</);

		const metrics = parseScrape(await (await fetch(`http://${listen}/metrics`)).text());
		const state = (s: string) =>
			metrics.get(`certificatee_endpoint_state{target="lb1",endpoint="lb1",state="${s}"}`);
		expect(["converged", "pending", "failed", "unobserved"].map(state)).toEqual([0, 1, 0, 0]);
		const converged = (c: string) =>
			`${metrics.get(`certificatee_certificate_endpoints_converged{certificate="${c}",target="lb1"}`)}/${metrics.get(`certificatee_certificate_endpoints{certificate="${c}",target="lb1"}`)}`;
		expect([converged("shop"), converged("web")]).toEqual(["1/1", "0/1"]);
		expect(metrics.get("certificatee_cycle_converged")).toBe(0);
	});
});
