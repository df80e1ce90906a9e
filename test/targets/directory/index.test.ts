import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import { cycleOutcome } from "../../../src/reconcile/outcome.js";
import type { EndpointReport, TargetReport } from "../../../src/reconcile/report.js";
import { type DirectoryTargetConfig, directoryTargetSchema } from "../../../src/targets/directory/index.js";
import { createDirectoryRunner } from "../../../src/targets/directory/runner.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";

let root: string;
let alpha: DesiredCertificate;
let alphaRenewed: DesiredCertificate;
let beta: DesiredCertificate;
let rootPem: string;

async function desired(name: string, withRoot = false): Promise<DesiredCertificate> {
	const ca = await createTestCa(`${name} root`);
	const inter = await createTestCa(`${name} intermediate`, { issuer: ca });
	const leaf = await issueTestLeaf(ca, { names: [`${name}.example`], intermediates: [inter] });
	if (withRoot) rootPem = ca.certPem;
	const chain = withRoot ? `${leaf.chainPem}\n${ca.certPem}` : leaf.chainPem;
	const bundle = parseBundle({ cert: leaf.certPem, chain, key: leaf.keyPem }, { source: `test ${name}` });
	return { name, names: [`${name}.example`], bundle, origin: "test" };
}

beforeAll(async () => {
	root = mkdtempSync(join(tmpdir(), "directory-target-"));
	alpha = await desired("alpha", true);
	alphaRenewed = await desired("alpha", true);
	beta = await desired("beta");
});
afterAll(async () => {
	await rm(root, { recursive: true, force: true });
});

let counter = 0;
function config(extra: Record<string, unknown>): DirectoryTargetConfig {
	counter += 1;
	return directoryTargetSchema.parse({
		name: "files",
		type: "directory",
		path: join(root, `t${counter}`),
		...extra,
	});
}

const signal = new AbortController().signal;
/** One cycle of a fresh directory target (on_change runs not remembered across calls). */
const run = async (c: DirectoryTargetConfig, want: DesiredCertificate[], cycle: "plan" | "sync" = "sync") =>
	(await createDirectoryRunner(c).run(want, cycle, signal)).endpoints[0] as EndpointReport;
const sync = (c: DirectoryTargetConfig, want: DesiredCertificate[]) => run(c, want, "sync");
const plan = (c: DirectoryTargetConfig, want: DesiredCertificate[]) => run(c, want, "plan");
/** Steps as [op, certificate, result] (result undefined in a plan). */
const steps = (e: EndpointReport) => e.steps.map((s) => [s.op, s.certificate, s.result]);
const classes = (e: EndpointReport) =>
	e.verdicts.map((v) => [v.class, "certificate" in v ? v.certificate : ""]);

const mode = (p: string) => statSync(p).mode & 0o7777;
const text = (p: string) => readFileSync(p, "utf8");

describe("targets/directory", () => {
	it("kubernetes-tls: one directory per certificate with tls.crt (leaf + chain), tls.key 0600, ca.crt from the root", async () => {
		const c = config({ layout: "kubernetes-tls" });
		const result = await sync(c, [alpha, beta]);
		expect(steps(result)).toEqual([
			["directory-write", "alpha", "ok"],
			["directory-write", "beta", "ok"],
		]);
		expect(result.steps[0]?.serial).toBe(alpha.bundle.leaf.serial);
		const dir = join(c.path, "alpha");
		expect(readdirSync(dir).sort()).toEqual(["ca.crt", "tls.crt", "tls.key"]);
		expect(text(join(dir, "tls.crt"))).toBe(alpha.bundle.fullchainPem);
		expect(text(join(dir, "tls.key"))).toBe(alpha.bundle.key.reveal());
		expect(new X509Certificate(text(join(dir, "ca.crt"))).subject).toBe(new X509Certificate(rootPem).subject);
		expect(mode(join(dir, "tls.key"))).toBe(0o600);
		expect(mode(join(dir, "tls.crt"))).toBe(0o644);
		// beta's chain has no root: no ca.crt
		expect(readdirSync(join(c.path, "beta")).sort()).toEqual(["tls.crt", "tls.key"]);
		const key = new X509Certificate(text(join(dir, "tls.crt")));
		expect(
			key.checkPrivateKey((await import("node:crypto")).createPrivateKey(text(join(dir, "tls.key")))),
		).toBe(true);
	});

	it("kubernetes-tls with one listed certificate writes straight into path; ca_file gives ca.crt", async () => {
		const caFile = join(root, "ca.pem");
		writeFileSync(caFile, rootPem);
		const c = config({ certificates: ["beta"], ca_file: caFile });
		await sync(c, [alpha, beta]);
		expect(readdirSync(c.path).sort()).toEqual(["ca.crt", "tls.crt", "tls.key"]);
		expect(text(join(c.path, "ca.crt"))).toBe(rootPem);
		expect(text(join(c.path, "tls.crt"))).toBe(beta.bundle.fullchainPem);
	});

	it("haproxy-pem: one combined <name>.pem per certificate, 0600, in one shared directory", async () => {
		const c = config({ layout: "haproxy-pem" });
		await sync(c, [alpha, beta]);
		expect(readdirSync(c.path).sort()).toEqual(["alpha.pem", "beta.pem"]);
		const pem = text(join(c.path, "alpha.pem"));
		expect(pem).toBe(alpha.bundle.fullchainPem + alpha.bundle.key.reveal());
		expect(mode(join(c.path, "alpha.pem"))).toBe(0o600);
		const again = parseBundle({ combined: pem }, { source: "written" });
		expect(again.leaf.fingerprint).toBe(alpha.bundle.leaf.fingerprint);
	});

	it("split: cert.pem, chain.pem, fullchain.pem, privkey.pem (0600) per certificate", async () => {
		const c = config({ layout: "split" });
		await sync(c, [alpha]);
		const dir = join(c.path, "alpha");
		expect(readdirSync(dir).sort()).toEqual(["cert.pem", "chain.pem", "fullchain.pem", "privkey.pem"]);
		expect(text(join(dir, "cert.pem"))).toBe(alpha.bundle.certPem);
		expect(text(join(dir, "chain.pem"))).toBe(alpha.bundle.chainPem);
		expect(text(join(dir, "fullchain.pem"))).toBe(alpha.bundle.fullchainPem);
		expect(mode(join(dir, "privkey.pem"))).toBe(0o600);
	});

	it.each(["kubernetes-tls", "haproxy-pem", "split"] as const)(
		"%s: a second run changes nothing on disk and runs no on_change; a renewal runs it once with the certificate's name and path",
		async (layout) => {
			const log = join(root, `hook-${layout}.log`);
			const c = config({
				layout,
				on_change: { command: ["sh", "-c", `echo "$CERTIFICATEE_CERTIFICATE $CERTIFICATEE_PATH" >> ${log}`] },
			});
			const first = await sync(c, [alpha, beta]);
			expect(steps(first)).toEqual([
				["directory-write", "alpha", "ok"],
				["on-change", "alpha", "ok"],
				["directory-write", "beta", "ok"],
				["on-change", "beta", "ok"],
			]);
			expect(text(log).trim().split("\n")).toHaveLength(2);
			const path = layout === "haproxy-pem" ? join(c.path, "alpha.pem") : join(c.path, "alpha");
			const before = statSync(path, { bigint: true });
			const second = await sync(c, [alpha, beta]);
			expect(second.steps).toEqual([]);
			expect(classes(second)).toEqual([
				["in-sync", "alpha"],
				["in-sync", "beta"],
			]);
			const after = statSync(path, { bigint: true });
			expect([after.ino, after.mtimeNs]).toEqual([before.ino, before.mtimeNs]);
			expect(text(log).trim().split("\n")).toHaveLength(2);
			const planned = await plan(c, [alphaRenewed, beta]);
			expect(steps(planned)).toEqual([
				["directory-write", "alpha", undefined],
				["on-change", "alpha", undefined],
			]);
			expect(classes(planned)).toEqual([
				["stale", "alpha"],
				["in-sync", "beta"],
			]);
			expect(statSync(path, { bigint: true }).ino).toBe(before.ino);
			const renewed = await sync(c, [alphaRenewed, beta]);
			expect(steps(renewed)).toEqual([
				["directory-write", "alpha", "ok"],
				["on-change", "alpha", "ok"],
			]);
			expect(renewed.steps[0]?.serial).toBe(alphaRenewed.bundle.leaf.serial);
			expect(text(log).trim().split("\n").at(-1)).toBe(`alpha ${path}`);
			expect(text(log).trim().split("\n")).toHaveLength(3);
		},
	);

	it("a failing on_change is reported without undoing the swap", async () => {
		const c = config({ layout: "split", on_change: { command: ["sh", "-c", "echo broken >&2; exit 3"] } });
		const result = await sync(c, [alpha]);
		expect(steps(result)).toEqual([
			["directory-write", "alpha", "ok"],
			["on-change", "alpha", "failed"],
		]);
		expect(result.steps[1]?.error).toMatchObject({
			code: "HOOK_FAILED",
			message: "on_change command exited with 3: broken",
		});
		expect(classes(result)).toEqual([["in-sync", "alpha"]]);
		expect(text(join(c.path, "alpha", "cert.pem"))).toBe(alpha.bundle.certPem);
	});

	it("an on_change that outlives its timeout is stopped and reported", async () => {
		const c = config({ layout: "haproxy-pem", on_change: { command: ["sleep", "5"], timeout: "200ms" } });
		const result = await sync(c, [beta]);
		expect(steps(result)).toEqual([
			["directory-write", "beta", "ok"],
			["on-change", "beta", "failed"],
		]);
		expect(result.steps[1]?.error).toMatchObject({
			code: "HOOK_FAILED",
			message: "on_change command timed out after 200 ms",
		});
	});

	it("a listed certificate that is not desired fails alone and leaves its files; the others are written", async () => {
		const c = config({ layout: "split", certificates: ["alpha", "gamma"] });
		const result = await sync(c, [alpha, beta]);
		expect(steps(result)).toEqual([
			["directory-write", "alpha", "ok"],
			["directory-write", "gamma", "failed"],
		]);
		expect(result.steps[1]?.error?.code).toBe("NOT_AVAILABLE");
		expect(classes(result)).toEqual([["in-sync", "alpha"]]);
		expect(existsSync(join(c.path, "beta"))).toBe(false);
	});

	it("a listed certificate awaited (issued, none yet) is left out: no failed step, the others are written", async () => {
		const c = config({ layout: "split", certificates: ["alpha", "gamma"] });
		const result = (
			await createDirectoryRunner(c).run([alpha, beta], "sync", signal, undefined, undefined, ["gamma"])
		).endpoints[0] as EndpointReport;
		expect(steps(result)).toEqual([["directory-write", "alpha", "ok"]]);
		expect(classes(result)).toEqual([["in-sync", "alpha"]]);
		expect(existsSync(join(c.path, "gamma"))).toBe(false);
	});

	it("a bad certificate name fails that certificate with ATOMICDIR_BAD_NAME, not the target", async () => {
		const c = config({ layout: "haproxy-pem" });
		const evil = { ...beta, name: "../evil" };
		const result = await sync(c, [evil, alpha]);
		expect(steps(result)).toEqual([
			["directory-write", "../evil", "failed"],
			["directory-write", "alpha", "ok"],
		]);
		expect(result.steps[0]?.error?.code).toBe("ATOMICDIR_BAD_NAME");
		expect(existsSync(join(c.path, "..", "evil.pem"))).toBe(false);
	});

	it("plan writes nothing, not even the target directory", async () => {
		const c = config({ layout: "kubernetes-tls" });
		const planned = await plan(c, [alpha]);
		expect(planned.steps).toMatchObject([{ op: "directory-write", why: "target does not exist" }]);
		expect(classes(planned)).toEqual([["missing", "alpha"]]);
		expect(existsSync(c.path)).toBe(false);
		expect(JSON.stringify(planned)).not.toContain("PRIVATE KEY");
	});

	it("rejects unknown keys, relative paths and a shell string as on_change", () => {
		const base = { name: "x", type: "directory", path: "/srv/tls" };
		expect(directoryTargetSchema.safeParse({ ...base, bogus: 1 }).success).toBe(false);
		expect(directoryTargetSchema.safeParse({ ...base, path: "srv/tls" }).success).toBe(false);
		expect(
			directoryTargetSchema.safeParse({ ...base, on_change: { command: "nginx -s reload" } }).success,
		).toBe(false);
		expect(directoryTargetSchema.parse({ ...base, dir_mode: "0750" })).toMatchObject({
			layout: "kubernetes-tls",
			swap: "exchange",
			file_mode: 0o644,
			dir_mode: 0o750,
		});
	});
});

describe("targets/directory/runner", () => {
	const outcome = (t: TargetReport) =>
		cycleOutcome({
			mode: "plan",
			startedAt: "",
			durationMs: 0,
			certificates: [],
			sourceProblems: [],
			targets: [t],
		});

	it("plans a write and its on_change per differing certificate, syncs them, then plans nothing; on_change failure is its own step", async () => {
		const c = config({ layout: "split", on_change: { command: ["false"] } });
		const runner = createDirectoryRunner(c);
		const planned = await runner.run([alpha, beta], "plan", signal);
		expect(planned.endpoints[0]!.steps.map((s) => [s.op, s.certificate, s.why])).toEqual([
			["directory-write", "alpha", "target does not exist"],
			["on-change", "alpha", "files changed"],
			["directory-write", "beta", "target does not exist"],
			["on-change", "beta", "files changed"],
		]);
		expect(outcome(planned)).toMatchObject({ pending: 4, converged: false });
		const synced = await runner.run([alpha, beta], "sync", signal);
		expect(steps(synced.endpoints[0]!)).toEqual([
			["directory-write", "alpha", "ok"],
			["on-change", "alpha", "failed"],
			["directory-write", "beta", "ok"],
			["on-change", "beta", "failed"],
		]);
		expect(outcome(synced).failures.map((f) => [f.kind, f.code, f.certificate])).toEqual([
			["write", "HOOK_FAILED", "alpha"],
			["write", "HOOK_FAILED", "beta"],
		]);
		const again = await runner.run([alpha, beta], "plan", signal);
		// Nothing to write; the failed on_change runs are what is left to do.
		expect(again.endpoints[0]!.steps.map((s) => [s.op, s.certificate, s.why])).toEqual([
			["on-change", "alpha", "retrying: it has not succeeded since the files changed"],
			["on-change", "beta", "retrying: it has not succeeded since the files changed"],
		]);
		expect(again.endpoints[0]!.refs.map((r) => r.class)).toEqual(["in-sync", "in-sync"]);
		expect(outcome(again)).toMatchObject({ pending: 2, converged: false });
		expect(JSON.stringify([planned, synced])).not.toContain("PRIVATE KEY");
	});

	it("a failed on_change is retried by the next sync without writing, and not once it succeeded", async () => {
		const fixed = join(root, "hook-fixed");
		const c = config({ layout: "haproxy-pem", on_change: { command: ["test", "-e", fixed] } });
		const runner = createDirectoryRunner(c);
		expect(steps((await runner.run([alpha], "sync", signal)).endpoints[0]!)).toEqual([
			["directory-write", "alpha", "ok"],
			["on-change", "alpha", "failed"],
		]);
		const retried = (await runner.run([alpha], "sync", signal)).endpoints[0]!;
		expect(retried.steps.map((s) => [s.op, s.why, s.result])).toEqual([
			["on-change", "retrying: it has not succeeded since the files changed", "failed"],
		]);
		writeFileSync(fixed, "");
		expect(steps((await runner.run([alpha], "sync", signal)).endpoints[0]!)).toEqual([
			["on-change", "alpha", "ok"],
		]);
		expect((await runner.run([alpha], "sync", signal)).endpoints[0]!.steps).toEqual([]);
	});

	it("a write that fails skips its on_change and leaves the certificate out of the verdicts; the others are written", async () => {
		const c = config({ layout: "split", on_change: { command: ["true"] } });
		const runner = createDirectoryRunner(c);
		// alpha's set directory is a file: observe sees a difference, the swap fails.
		const { mkdirSync } = await import("node:fs");
		mkdirSync(c.path);
		writeFileSync(join(c.path, "alpha"), "not a directory");
		const e = (await runner.run([alpha, beta], "sync", signal)).endpoints[0]!;
		expect(steps(e)).toEqual([
			["directory-write", "alpha", "failed"],
			["on-change", "alpha", "skipped"],
			["directory-write", "beta", "ok"],
			["on-change", "beta", "ok"],
		]);
		expect(e.steps[1]?.note).toBe("an earlier write for this ref failed");
		expect(classes(e)).toEqual([["in-sync", "beta"]]);
		expect(text(join(c.path, "alpha"))).toBe("not a directory");
	});
});

describe("targets/directory: never downgrade (the set's file on disk is the live certificate)", () => {
	let older: DesiredCertificate;
	let newer: DesiredCertificate;
	beforeAll(async () => {
		const ca = await createTestCa("downgrade root");
		const day = 86_400_000;
		const issue = async (days: number) => {
			const leaf = await issueTestLeaf(ca, {
				names: ["gamma.example"],
				notAfter: new Date(Date.now() + days * day),
			});
			const bundle = parseBundle({ combined: leaf.combinedPem }, { source: `gamma ${days}d` });
			return { name: "gamma", names: ["gamma.example"], bundle, origin: "test" };
		};
		older = await issue(30);
		newer = await issue(60);
	});
	const leafSerial = (c: DirectoryTargetConfig) => {
		const file = {
			"haproxy-pem": join(c.path, "gamma.pem"),
			"kubernetes-tls": join(c.path, "gamma", "tls.crt"),
			split: join(c.path, "gamma", "cert.pem"),
		}[c.layout];
		return new X509Certificate(text(file)).serialNumber.replace(/^0+/, "");
	};
	const serial = (d: DesiredCertificate) => d.bundle.leaf.serial.replace(/^0+/, "");
	const runner = (c: DirectoryTargetConfig, neverDowngrade: boolean) =>
		createDirectoryRunner(c, {}, () => new Date(), { neverDowngrade });
	const cycle = async (
		c: DirectoryTargetConfig,
		want: DesiredCertificate,
		how: "plan" | "sync",
		neverDowngrade: boolean,
	) => {
		const report: TargetReport = await runner(c, neverDowngrade).run([want], how, signal);
		return { e: report.endpoints[0] as EndpointReport, report };
	};

	it.each(["haproxy-pem", "kubernetes-tls", "split"] as const)(
		"%s: an older certificate is not written over a newer one with the option on, and is with it off",
		async (layout) => {
			const c = config({ layout });
			await cycle(c, newer, "sync", true);
			expect(leafSerial(c)).toBe(serial(newer));

			const planned = await cycle(c, older, "plan", true);
			expect(classes(planned.e)).toEqual([["refused", "gamma"]]);
			expect(planned.e.steps).toEqual([]);

			const refused = await cycle(c, older, "sync", true);
			expect(refused.e.steps).toEqual([]);
			expect(refused.e.verdicts[0]).toMatchObject({ class: "refused", code: "UPDATE_WOULD_DOWNGRADE" });
			const outcome = cycleOutcome({
				mode: "sync",
				startedAt: "",
				durationMs: 0,
				certificates: [],
				sourceProblems: [],
				targets: [refused.report],
			});
			expect(outcome.failures.map((f) => f.code)).toEqual(["UPDATE_WOULD_DOWNGRADE"]);
			expect(leafSerial(c)).toBe(serial(newer));

			const rolledBack = await cycle(c, older, "sync", false);
			expect(steps(rolledBack.e)).toEqual([["directory-write", "gamma", "ok"]]);
			expect(leafSerial(c)).toBe(serial(older));

			// With the option on, a renewal (later expiry) is written as always.
			const renewed = await cycle(c, newer, "sync", true);
			expect(steps(renewed.e)).toEqual([["directory-write", "gamma", "ok"]]);
			expect(leafSerial(c)).toBe(serial(newer));

			// A deliberate replacement (certificatee replace) is written over the later expiry with the option on.
			const replacement = { reason: "CA change", by: "alice@host", requestedAt: new Date().toISOString() };
			const replaced = await cycle(c, { ...older, replacement }, "sync", true);
			expect(steps(replaced.e)).toEqual([["directory-write", "gamma", "ok"]]);
			expect(leafSerial(c)).toBe(serial(older));
		},
	);
});
