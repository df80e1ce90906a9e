import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import {
	type DirectoryTargetConfig,
	directoryTargetSchema,
	planDirectoryTarget,
	syncDirectoryTarget,
} from "../../../src/targets/directory/index.js";
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

const mode = (p: string) => statSync(p).mode & 0o7777;
const text = (p: string) => readFileSync(p, "utf8");

describe("targets/directory", () => {
	it("kubernetes-tls: one directory per certificate with tls.crt (leaf + chain), tls.key 0600, ca.crt from the root", async () => {
		const c = config({ layout: "kubernetes-tls" });
		const result = await syncDirectoryTarget(c, [alpha, beta]);
		expect(result.certificates.map((o) => o.status)).toEqual(["written", "written"]);
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
		await syncDirectoryTarget(c, [alpha, beta]);
		expect(readdirSync(c.path).sort()).toEqual(["ca.crt", "tls.crt", "tls.key"]);
		expect(text(join(c.path, "ca.crt"))).toBe(rootPem);
		expect(text(join(c.path, "tls.crt"))).toBe(beta.bundle.fullchainPem);
	});

	it("haproxy-pem: one combined <name>.pem per certificate, 0600, in one shared directory", async () => {
		const c = config({ layout: "haproxy-pem" });
		await syncDirectoryTarget(c, [alpha, beta]);
		expect(readdirSync(c.path).sort()).toEqual(["alpha.pem", "beta.pem"]);
		const pem = text(join(c.path, "alpha.pem"));
		expect(pem).toBe(alpha.bundle.fullchainPem + alpha.bundle.key.reveal());
		expect(mode(join(c.path, "alpha.pem"))).toBe(0o600);
		const again = parseBundle({ combined: pem }, { source: "written" });
		expect(again.leaf.fingerprint).toBe(alpha.bundle.leaf.fingerprint);
	});

	it("split: cert.pem, chain.pem, fullchain.pem, privkey.pem (0600) per certificate", async () => {
		const c = config({ layout: "split" });
		await syncDirectoryTarget(c, [alpha]);
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
			await syncDirectoryTarget(c, [alpha, beta]);
			expect(text(log).trim().split("\n")).toHaveLength(2);
			const path = layout === "haproxy-pem" ? join(c.path, "alpha.pem") : join(c.path, "alpha");
			const before = statSync(path, { bigint: true });
			const second = await syncDirectoryTarget(c, [alpha, beta]);
			expect(second.certificates.map((o) => o.status)).toEqual(["unchanged", "unchanged"]);
			const after = statSync(path, { bigint: true });
			expect([after.ino, after.mtimeNs]).toEqual([before.ino, before.mtimeNs]);
			expect(text(log).trim().split("\n")).toHaveLength(2);
			const plan = await planDirectoryTarget(c, [alphaRenewed, beta]);
			expect(plan.certificates.map((p) => p.status)).toEqual(["would-write", "unchanged"]);
			expect(statSync(path, { bigint: true }).ino).toBe(before.ino);
			const renewed = await syncDirectoryTarget(c, [alphaRenewed, beta]);
			expect(renewed.certificates[0]).toMatchObject({ status: "written", hook: { ok: true } });
			expect(renewed.certificates[1]).toMatchObject({ status: "unchanged" });
			expect(text(log).trim().split("\n").at(-1)).toBe(`alpha ${path}`);
			expect(text(log).trim().split("\n")).toHaveLength(3);
		},
	);

	it("a failing on_change is reported without undoing the swap", async () => {
		const c = config({ layout: "split", on_change: { command: ["sh", "-c", "echo broken >&2; exit 3"] } });
		const result = await syncDirectoryTarget(c, [alpha]);
		const outcome = result.certificates[0]!;
		expect(outcome.status).toBe("written");
		if (outcome.status !== "written") return;
		expect(outcome.hook?.ok).toBe(false);
		if (outcome.hook?.ok !== false) return;
		expect(outcome.hook.error.code).toBe("HOOK_FAILED");
		expect(outcome.hook.error.message).toBe("on_change command exited with 3: broken");
		expect(text(join(c.path, "alpha", "cert.pem"))).toBe(alpha.bundle.certPem);
	});

	it("an on_change that outlives its timeout is stopped and reported", async () => {
		const c = config({ layout: "haproxy-pem", on_change: { command: ["sleep", "5"], timeout: "200ms" } });
		const result = await syncDirectoryTarget(c, [beta]);
		expect(result.certificates[0]).toMatchObject({
			status: "written",
			hook: {
				ok: false,
				error: { code: "HOOK_FAILED", message: "on_change command timed out after 200 ms" },
			},
		});
	});

	it("a listed certificate that is not desired fails alone and leaves its files; the others are written", async () => {
		const c = config({ layout: "split", certificates: ["alpha", "gamma"] });
		const result = await syncDirectoryTarget(c, [alpha, beta]);
		expect(result.certificates.map((o) => [o.certificate, o.status])).toEqual([
			["alpha", "written"],
			["gamma", "failed"],
		]);
		expect(existsSync(join(c.path, "beta"))).toBe(false);
	});

	it("a bad certificate name fails that certificate with ATOMICDIR_BAD_NAME, not the target", async () => {
		const c = config({ layout: "haproxy-pem" });
		const evil = { ...beta, name: "../evil" };
		const result = await syncDirectoryTarget(c, [evil, alpha]);
		expect(result.certificates[0]).toMatchObject({ status: "failed", error: { code: "ATOMICDIR_BAD_NAME" } });
		expect(result.certificates[1]).toMatchObject({ status: "written" });
		expect(existsSync(join(c.path, "..", "evil.pem"))).toBe(false);
	});

	it("plan writes nothing, not even the target directory", async () => {
		const c = config({ layout: "kubernetes-tls" });
		const plan = await planDirectoryTarget(c, [alpha]);
		expect(plan.certificates).toMatchObject([
			{ status: "would-write", differences: ["target does not exist"] },
		]);
		expect(existsSync(c.path)).toBe(false);
		expect(JSON.stringify(plan)).not.toContain("PRIVATE KEY");
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
	it("plans a write per differing certificate, syncs it, then plans nothing; on_change failure is its own step", async () => {
		const { createDirectoryRunner } = await import("../../../src/targets/directory/runner.js");
		const { cycleOutcome } = await import("../../../src/reconcile/report.js");
		const c = config({ layout: "split", on_change: { command: ["false"] } });
		const runner = createDirectoryRunner(c);
		const signal = new AbortController().signal;
		const report = (t: Awaited<ReturnType<typeof runner.run>>) => ({
			mode: "plan" as const,
			startedAt: "",
			durationMs: 0,
			certificates: [],
			sourceProblems: [],
			targets: [t],
		});
		const plan = await runner.run([alpha, beta], "plan", signal);
		expect(plan.endpoints[0]!.steps.map((s) => [s.op, s.certificate, s.why])).toEqual([
			["directory-write", "alpha", "target does not exist"],
			["directory-write", "beta", "target does not exist"],
		]);
		expect(cycleOutcome(report(plan))).toMatchObject({ pending: 2, converged: false });
		const sync = await runner.run([alpha, beta], "sync", signal);
		expect(sync.endpoints[0]!.steps.map((s) => [s.op, s.certificate, s.result])).toEqual([
			["directory-write", "alpha", "ok"],
			["on-change", "alpha", "failed"],
			["directory-write", "beta", "ok"],
			["on-change", "beta", "failed"],
		]);
		const again = await runner.run([alpha, beta], "plan", signal);
		expect(again.endpoints[0]!.steps).toEqual([]);
		expect(again.endpoints[0]!.refs.map((r) => r.class)).toEqual(["in-sync", "in-sync"]);
		expect(cycleOutcome(report(again)).pending).toBe(0);
		expect(JSON.stringify([plan, sync, again])).not.toContain("PRIVATE KEY");
	});
});
