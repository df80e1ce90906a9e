/**
 * The fleet page in a real browser (Debian chromium driven by playwright-core, no browser download) on a real
 * `certificatee run`: a real HAProxy holding a stale certificate and a legacy duplicate, a second HAProxy target
 * whose socket does not exist, a local CA issuing one certificate to a directory. The page renders server-side
 * (JavaScript on and off alike), its numbers match `status --json`, the failing endpoint shows its error, the
 * inline script swaps in a new cycle without a reload, and a screenshot lands in docs/img/fleet-page.png.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusDocument } from "../../src/metrics/status-view.js";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../harness/certs.js";
import { certificatee, type Daemon, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { expectNoKeyMaterial } from "../harness/no-secrets.js";
import { freePorts } from "../harness/ports.js";

const SCREENSHOT = join(import.meta.dirname, "../../docs/img/fleet-page.png");

let dir: string;
let h: Haproxy;
let leaves: TestLeaf[];
let daemon: Daemon;
let browser: Browser;
let listen: string;
let config: string;

beforeAll(async () => {
	const built = ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "fleet-page-"));
	const ca = await createTestCa("fleet page CA");
	const days = (n: number) => new Date(Date.now() + n * 86_400_000);
	// Lives part-way through, so the timelines have something to show.
	const shop = await issueTestLeaf(ca, {
		names: ["shop.test", "www.shop.test"],
		notBefore: days(-60),
		notAfter: days(30),
	});
	const legacyShop = await issueTestLeaf(ca, {
		names: ["shop.test", "www.shop.test"],
		notBefore: days(-80),
		notAfter: days(10),
	});
	const apiOld = await issueTestLeaf(ca, { names: ["api.test"], notBefore: days(-85), notAfter: days(5) });
	const apiNew = await issueTestLeaf(ca, { names: ["api.test"], notBefore: days(-10), notAfter: days(80) });
	leaves = [shop, legacyShop, apiOld, apiNew];
	h = await startHaproxy({
		crtDir: {
			"shop.pem": shop.combinedPem,
			"legacy_shop.pem": legacyShop.combinedPem,
			"api.pem": apiOld.combinedPem,
		},
	});
	for (const d of ["source", "out"]) mkdirSync(join(dir, d));
	writeFileSync(join(dir, "source", "shop.pem"), shop.combinedPem, { mode: 0o600 });
	writeFileSync(join(dir, "source", "api.pem"), apiNew.combinedPem, { mode: 0o600 });
	const [port] = (await freePorts(1)) as [number];
	listen = `127.0.0.1:${port}`;
	config = join(dir, "certificatee.yaml");
	const runtime = (name: string, socket: string, crtDir: string) => ({
		name,
		type: "haproxy-runtime",
		socket,
		crt_dir: crtDir,
		certificates: ["shop", "api"],
	});
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: join(dir, "state"),
			// Cycles run at start and on SIGHUP only, so each test sees the cycle it asked for.
			interval: "1h",
			listen,
			sources: [
				{ name: "files", type: "directory", path: join(dir, "source") },
				{ name: "internal", type: "local-ca", ca_common_name: "Fleet Page CA" },
			],
			certificates: [{ name: "intranet", domains: ["intranet.test"], issuer: "internal" }],
			targets: [
				{ ...runtime("lb1", h.adminSocket, h.crtDir), probe: h.address },
				runtime("lb2", join(dir, "lb2.sock"), join(dir, "lb2")),
				{ name: "files", type: "directory", path: join(dir, "out"), layout: "kubernetes-tls" },
			],
		}),
	);
	await built;
	daemon = spawnCertificatee(["run", "--config", config]);
	// One browser for the whole file; playwright-core runs it without a sandbox (root in a container).
	[browser] = await Promise.all([
		chromium.launch({ executablePath: "/usr/bin/chromium", headless: true }),
		daemon.waitForLog(/^cycle finished$/, { timeoutMs: 30_000 }),
	]);
}, 90_000);

afterAll(async () => {
	await browser?.close();
	await daemon?.stop();
	await h?.stop();
	rmSync(dir, { recursive: true, force: true });
});

async function statusJson(): Promise<StatusDocument> {
	const res = await fetch(`http://${listen}/status.json`);
	expect(res.status).toBe(200);
	return (await res.json()) as StatusDocument;
}

async function open(context: BrowserContext): Promise<Page> {
	const page = await context.newPage();
	const res = await page.goto(`http://${listen}/`);
	expect(res?.status()).toBe(200);
	return page;
}

/** What the page shows, read from the DOM: the same fields as the summary. */
async function shown(page: Page) {
	const cells = await page
		.locator("td[data-cert]")
		.evaluateAll((tds) =>
			tds.map((td) => [td.getAttribute("data-cert"), td.getAttribute("data-target"), td.textContent]),
		);
	const endpoints = await page
		.locator("tr[data-endpoint]")
		.evaluateAll((trs) =>
			trs.map((tr) => [
				tr.getAttribute("data-target"),
				tr.getAttribute("data-endpoint"),
				tr.children[1]?.textContent,
			]),
		);
	const stat = (key: string) => page.locator(`[data-stat="${key}"]`).textContent();
	return {
		certificates: await page
			.locator("tr[data-certificate]")
			.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-certificate"))),
		cells,
		endpoints,
		duplicates: await stat("duplicates"),
		endpointsConverged: await stat("endpoints"),
		timelines: await page.locator("svg.timeline").count(),
	};
}

function expected(doc: StatusDocument) {
	const endpoints = doc.summary.endpoints;
	return {
		certificates: doc.summary.certificates.map((c) => c.name),
		cells: doc.summary.certificates.flatMap((c) =>
			c.targets.map((t) => [c.name, t.target, `${t.converged}/${t.total}`]),
		),
		endpoints: endpoints.map((e) => [e.target, e.endpoint, e.state]),
		duplicates: String(doc.summary.duplicates.length),
		endpointsConverged: `${endpoints.filter((e) => e.state === "converged").length}/${endpoints.length}`,
		timelines: doc.summary.certificates.filter((c) => c.notAfter !== undefined).length,
	};
}

describe("the fleet page in chromium, on a running daemon", () => {
	let js: BrowserContext;
	let page: Page;
	const policyErrors: string[] = [];

	it("renders the first cycle: timelines, the failing endpoint's error, the duplicate removed; screenshot", async () => {
		js = await browser.newContext({ viewport: { width: 1280, height: 900 } });
		page = await open(js);
		page.on("console", (m) => {
			if (m.type() === "error") policyErrors.push(m.text());
		});
		const doc = await statusJson();
		expect(await shown(page)).toEqual(expected(doc));
		expect(await page.locator("svg.timeline").count()).toBe(3);
		// The local CA's certificate has a renewal point; files from a directory have none.
		expect(await page.locator('tr[data-certificate="intranet"] svg .renew').count()).toBe(1);
		expect(await page.locator('tr[data-certificate="shop"] svg .renew').count()).toBe(0);
		const lb2 = doc.summary.endpoints.find((e) => e.target === "lb2");
		expect(lb2).toMatchObject({ up: false, state: "unobserved" });
		const row = page.locator('tr[data-endpoint="lb2"]');
		expect(await row.textContent()).toContain(lb2?.error ?? "no error in /status.json");
		expect(await row.locator(".hint").textContent()).toBe(lb2?.hint);
		expect(await page.locator('[data-removed="legacy_shop.pem"]').count()).toBe(1);
		expect(await page.locator('[data-stat="removed"]').textContent()).toBe("1");
		// Nothing secret on the page nor in the document it is made from.
		const keys = leaves.map((l) => l.keyPem);
		expectNoKeyMaterial(await page.content(), keys);
		expectNoKeyMaterial(JSON.stringify(doc), keys);
		// The README's screenshot is refreshed only on request, so a test run leaves the work tree clean.
		const shot = await page.screenshot({ fullPage: true });
		expect(shot.length).toBeGreaterThan(1000);
		if (process.env.CERTIFICATEE_UPDATE_SCREENSHOT === "1") {
			mkdirSync(join(SCREENSHOT, ".."), { recursive: true });
			writeFileSync(SCREENSHOT, shot);
		}
	});

	it("after the next cycle the script swaps it in without a reload, and its numbers match status --json", async () => {
		const before = await page.locator("main").getAttribute("data-cycle");
		await page.evaluate(() => {
			(window as unknown as { marker: boolean }).marker = true;
		});
		const from = daemon.logs.length;
		daemon.signal("SIGHUP");
		await daemon.waitForLog(/^cycle finished$/, { from, timeoutMs: 30_000 });
		const doc = await statusJson();
		expect(doc.startedAt).not.toBe(before);
		await page.locator(`main[data-cycle="${doc.startedAt}"]`).waitFor({ timeout: 30_000 });
		// Same document, no navigation: the script fetched /status.json and swapped <main>.
		expect(await page.evaluate(() => (window as unknown as { marker?: boolean }).marker)).toBe(true);
		expect(await page.locator("#live").textContent()).toMatch(/^live · checked /);

		const cli = await certificatee(["--json", "status", "--config", config]);
		expect(cli.code, cli.stderr).toBe(0);
		const status = JSON.parse(cli.stdout) as StatusDocument;
		expect(await shown(page)).toEqual(expected(status));
		expect(expected(doc)).toEqual(expected(status));
		// The duplicate went in the first cycle: none left, as status sees it.
		expect(status.summary.duplicates).toEqual([]);
		expect(policyErrors).toEqual([]);
	});

	it("with JavaScript off: the same server-rendered page, refreshed by <noscript> meta refresh", async () => {
		const off = await browser.newContext({
			javaScriptEnabled: false,
			viewport: { width: 1280, height: 900 },
		});
		try {
			const page = await open(off);
			const doc = await statusJson();
			expect(await shown(page)).toEqual(expected(doc));
			expect(await page.locator('tr[data-endpoint="lb2"]').textContent()).toContain(
				doc.summary.endpoints.find((e) => e.target === "lb2")?.error,
			);
			expect(await page.locator('meta[http-equiv="refresh"]').getAttribute("content")).toBe("10");
			// The script never ran: the live line still says what the server wrote.
			expect(await page.locator("#live").textContent()).toBe("refreshes every 10 s");
		} finally {
			await off.close();
		}
		await js.close();
	});
});
