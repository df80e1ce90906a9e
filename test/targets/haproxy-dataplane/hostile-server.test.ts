/**
 * Issue 25, finding 3: one slow or hostile HTTP server must not stall every target. A server that answers a
 * byte at a time kept a cycle running for good (undici's timers are idle timers), and a 400 MB body was read
 * whole (1.33 GB RSS). Against hostile servers on loopback (a child process): each request ends at its
 * `timeout`, a body stops at `max_response_size`, an endpoint's whole part of a cycle ends at the target's
 * `endpoint_deadline`, and a directory target in the same cycle still gets the new certificate. The same
 * bounds hold in the ACME transport.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CertificateeError, isCertificateeError } from "../../../src/errors.js";
import { runCycle } from "../../../src/reconcile/cycle.js";
import { acmeRequest, MAX_ACME_RESPONSE_BYTES } from "../../../src/sources/acme/transport.js";
import { directoryTargetSchema } from "../../../src/targets/directory/index.js";
import { createDataplaneClient } from "../../../src/targets/haproxy-dataplane/client.js";
import {
	dataplaneEndpointSchema,
	dataplaneTargetSchema,
} from "../../../src/targets/haproxy-dataplane/schema.js";
import { type BuiltTarget, buildTarget } from "../../../src/targets/registry.js";
import { scaled } from "../../harness/deadline.js";
import { type HostileHttp, startHostileHttp } from "../../harness/hostile-http.js";
import { desiredCert } from "../../reconcile/scenario.js";

const MiB = 1024 ** 2;
let hostile: HostileHttp;
let dir: string;
const targets: BuiltTarget[] = [];

beforeAll(async () => {
	hostile = await startHostileHttp({ trickleMs: 300, floodBytes: 400 * MiB });
	dir = await mkdtemp(join(tmpdir(), "certificatee-hostile-"));
});

afterAll(async () => {
	await Promise.all(targets.map((t) => t.close()));
	await hostile?.close();
	await rm(dir, { recursive: true, force: true });
});

/** The work's outcome, or a failure naming what still ran when `ms` passed (the old code never ended). */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
	let timer: NodeJS.Timeout | undefined;
	const late = new Promise<never>((_, reject) => {
		timer = setTimeout(() => reject(new Error(`${what}: still running after ${ms} ms`)), ms);
	});
	try {
		return await Promise.race([work, late]);
	} finally {
		clearTimeout(timer);
	}
}

/** The work's outcome and how far the process's RSS rose above where it started, in MiB. */
async function rssGrowth<T>(work: () => Promise<T>): Promise<{ value: T; mib: number }> {
	const before = process.memoryUsage.rss();
	let peak = before;
	const sample = setInterval(() => {
		peak = Math.max(peak, process.memoryUsage.rss());
	}, 5);
	try {
		const value = await work();
		return { value, mib: (Math.max(peak, process.memoryUsage.rss()) - before) / MiB };
	} finally {
		clearInterval(sample);
	}
}

async function rejection(work: Promise<unknown>): Promise<CertificateeError> {
	const error = await work.then(
		() => new Error("expected a rejection"),
		(e: unknown) => e,
	);
	if (!(error instanceof CertificateeError)) throw error;
	return error;
}

function client(name: string, url: string, extra: Record<string, unknown> = {}) {
	const c = createDataplaneClient(
		dataplaneEndpointSchema.parse({ name, url, username: "u", password: "p4ssw0rd-x", ...extra }),
		{ sleep: async () => undefined, random: () => 0.5 },
	);
	targets.push({
		name,
		kind: "client",
		run: () => Promise.reject(new Error("unused")),
		close: () => c.close(),
	});
	return c;
}

describe("Data Plane API client against a hostile server", () => {
	it("a server sending a byte every 300 ms: each attempt ends at `timeout` (1 s), 3 attempts, ENDPOINT_TIMEOUT", async () => {
		const c = client("dp-trickle", hostile.trickle, { timeout: "1s" });
		const started = Date.now();
		const error = await within(scaled(10_000), "info()", rejection(c.info(AbortSignal.timeout(60_000))));
		expect(error.code).toBe("ENDPOINT_TIMEOUT");
		expect(error.message).toMatch(/endpoint dp-trickle: getInfo/);
		expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
	});

	it("a 400 MB answer: refused at max_response_size (default 64MiB) naming the endpoint and the cap; RSS stays bounded", async () => {
		const c = client("dp-flood", hostile.flood);
		const { value: error, mib } = await rssGrowth(() =>
			within(scaled(30_000), "info()", rejection(c.info(AbortSignal.timeout(60_000)))),
		);
		expect(error.code).toBe("ENDPOINT_RESPONSE_TOO_LARGE");
		expect(error.message).toMatch(
			/endpoint dp-flood: getInfo \(200\): the answer is larger than max_response_size \(64MiB\)/,
		);
		expect(error.hint).toMatch(/max_response_size/);
		expect(mib, "RSS growth (MiB)").toBeLessThan(200);
	});

	it("max_response_size is configurable (and validated)", async () => {
		const c = client("dp-small", hostile.flood, { max_response_size: "1MiB" });
		const error = await rejection(c.info(AbortSignal.timeout(60_000)));
		expect(error.message).toMatch(/max_response_size \(1MiB\)/);
		const bad = dataplaneEndpointSchema.safeParse({
			name: "x",
			url: "http://127.0.0.1:1",
			username: "u",
			password: "p",
			max_response_size: "lots",
		});
		expect(bad.error?.issues[0]?.message).toMatch(/expected a size like 512KiB, 64MiB or 1GiB, got "lots"/);
	});
});

describe("a cycle with a stuck endpoint", () => {
	it("endpoint_deadline: the trickling endpoint is failed at 2 s (ENDPOINT_DEADLINE), the flooding one at its cap (1 MiB), and the directory target gets the new certificate", async () => {
		const api = buildTarget(
			dataplaneTargetSchema.parse({
				name: "fleet",
				type: "haproxy-dataplane",
				endpoint_deadline: "2s",
				endpoints: [
					// A long request timeout: only the endpoint deadline can end this one in time.
					{ name: "stuck", url: hostile.trickle, username: "u", password: "p4ssw0rd-x", timeout: "5m" },
					// A small cap: the default (64 MiB, tested above) took longer than the 2 s deadline at a load of 25,
					// and this case is about each endpoint ending its own way within one cycle.
					{
						name: "flooding",
						url: hostile.flood,
						username: "u",
						password: "p4ssw0rd-x",
						max_response_size: "1MiB",
					},
				],
			}),
			{ now: () => new Date() },
		);
		const files = buildTarget(
			directoryTargetSchema.parse({ name: "files", type: "directory", path: dir, layout: "haproxy-pem" }),
			{ now: () => new Date() },
		);
		targets.push(api, files);
		const certificate = await desiredCert("app", ["app.test"]);
		const started = Date.now();
		const { value: report, mib } = await rssGrowth(() =>
			within(
				scaled(20_000),
				"the cycle",
				runCycle(
					{
						loadDesired: async () => ({ certificates: [certificate], problems: [] }),
						targets: [api, files],
						now: () => new Date(),
					},
					"sync",
					new AbortController().signal,
				),
			),
		);
		const elapsed = Date.now() - started;
		expect(elapsed, "the cycle ends soon after the deadline").toBeLessThan(scaled(10_000));
		const fleet = report.targets.find((t) => t.target === "fleet");
		const byName = new Map(fleet?.endpoints.map((e) => [e.endpoint, e]));
		expect(byName.get("stuck")?.ok).toBe(false);
		expect(byName.get("stuck")?.error?.code).toBe("ENDPOINT_DEADLINE");
		expect(byName.get("stuck")?.error?.message).toMatch(/stuck: .*endpoint_deadline \(2s\)/);
		expect(byName.get("stuck")?.error?.hint).toMatch(/raise endpoint_deadline/);
		expect(byName.get("flooding")?.error?.code).toBe("ENDPOINT_RESPONSE_TOO_LARGE");
		const directory = report.targets.find((t) => t.target === "files");
		expect(directory?.endpoints.every((e) => e.ok)).toBe(true);
		const written = await readFile(join(dir, "app.pem"), "utf8");
		expect(written).toContain(certificate.bundle.certPem);
		expect(mib, "RSS growth (MiB)").toBeLessThan(256);
	});
});

describe("ACME transport against a hostile server", () => {
	const agent = new Agent();
	afterAll(() => agent.close());
	const options = { dispatcher: agent, retries: 0, requestTimeoutMs: 1000, retryDelayMs: 1 };

	it("a CA sending a byte every 300 ms: the request ends at its timeout", async () => {
		const started = Date.now();
		const error = await within(
			scaled(8_000),
			"acmeRequest",
			rejection(
				acmeRequest(
					options,
					{ signal: AbortSignal.timeout(60_000), problems: [] },
					`${hostile.trickle}/dir`,
					"get",
				),
			),
		);
		expect(error.code).toBe("ACME_ERROR");
		expect(error.message).toMatch(/sent no complete answer within 1000 ms/);
		expect(Date.now() - started).toBeLessThan(scaled(4_000));
	});

	it("a 400 MB answer: refused past 1MiB, RSS stays bounded", async () => {
		const { value: error, mib } = await rssGrowth(() =>
			within(
				scaled(30_000),
				"acmeRequest",
				rejection(
					acmeRequest(
						{ ...options, requestTimeoutMs: 30_000 },
						{ signal: AbortSignal.timeout(60_000), problems: [] },
						`${hostile.flood}/dir`,
						"get",
					),
				),
			),
		);
		expect(MAX_ACME_RESPONSE_BYTES).toBe(MiB);
		expect(isCertificateeError(error, "ACME_ERROR")).toBe(true);
		expect(error.message).toMatch(/the answer is larger than 1MiB; not read further/);
		expect(mib, "RSS growth (MiB)").toBeLessThan(64);
	});
});
