import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Candidate } from "../../../src/sources/directory/files.js";
import { groupFiles } from "../../../src/sources/directory/files.js";
import {
	parseAll,
	type ReadOutcome,
	readOutcome,
	type Wire,
} from "../../../src/sources/directory/parse-pool.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { ensureBuilt } from "../../harness/cli.js";

const DAY = 86_400_000;
const DIST = join(import.meta.dirname, "../../../dist/sources/directory");
const signal = new AbortController().signal;

/** What a caller can see of an outcome: the bundle with its key, or the error's every field. */
function view(o: ReadOutcome): unknown {
	if (o.ok) return { ok: true, bundle: { ...o.bundle, key: o.bundle.key.reveal() } };
	if ("unreadable" in o) return { unreadable: (o.unreadable as Error).message };
	const { name, code, message, hint, context, retryable } = o.error;
	return { name, code, message, hint, context, retryable, isError: o.error instanceof Error };
}

let dir: string;
let candidates: Candidate[];
beforeAll(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-parse-pool-"));
	const root = await createTestCa("pool root");
	const inter = await createTestCa("pool intermediate", { issuer: root });
	const good = await issueTestLeaf(root, { names: ["good.test"] });
	const other = await issueTestLeaf(root, { names: ["other.test"] });
	const rsa = await issueTestLeaf(root, { names: ["rsa.test"], keyType: "rsa-2048" });
	const chained = await issueTestLeaf(root, { names: ["split.test"], intermediates: [inter] });
	const expired = await issueTestLeaf(root, {
		names: ["old.test"],
		notBefore: new Date(Date.now() - 10 * DAY),
		notAfter: new Date(Date.now() - DAY),
	});
	const files: Record<string, string> = {
		"good.pem": good.combinedPem,
		"rsa.pem": rsa.combinedPem,
		"split.crt": chained.certPem,
		"split.chain.pem": chained.chainPem,
		"split.key": chained.keyPem,
		"expired.pem": expired.combinedPem,
		"notpem.pem": "hello\n",
		"mismatch.pem": good.certPem + other.keyPem,
		"encrypted.pem": `${good.certPem}-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n`,
	};
	for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
	// A candidate whose file went away after the listing: unreadable.
	candidates = [
		...groupFiles(await readdir(dir)).candidates,
		{ name: "gone", kind: "combined", file: "gone.pem" },
	];
	await ensureBuilt();
});
afterAll(async () => {
	await rm(dir, { recursive: true, force: true });
});

describe("sources/directory parse pool", () => {
	it("a worker thread (the built module) gives every outcome exactly as the main thread does", async () => {
		const inline = candidates.map((c) => view(readOutcome(dir, c)));
		expect(inline.filter((o) => (o as { ok?: boolean }).ok).length).toBe(4);
		const pool = (await import(
			join(DIST, "parse-pool.js")
		)) as typeof import("../../../src/sources/directory/parse-pool.js");
		const next = new Int32Array(new SharedArrayBuffer(4));
		const worker = new Worker(join(DIST, "parse-worker.js"), { workerData: { dir, candidates, next } });
		const results = await new Promise<Array<[number, Wire]>>((resolve, reject) => {
			worker.once("message", resolve);
			worker.once("error", reject);
		});
		await worker.terminate();
		// The worker took every candidate from the shared counter.
		expect(results.map(([i]) => i)).toEqual(candidates.map((_, i) => i));
		const fromWorker = results.map(([, wire]) => view(pool.fromWire(wire)));
		expect(fromWorker).toEqual(inline);
		// Errors come back as CertificateeErrors of the built module, with every field.
		const mismatch = results.find(([i]) => candidates[i]?.name === "mismatch")?.[1];
		expect(mismatch && !mismatch.ok && "error" in mismatch && mismatch.error.code).toBe(
			"BUNDLE_KEY_MISMATCH",
		);
	});

	it("parseAll with workers gives the same outcomes, in the candidates' order, as without", async () => {
		const many = Array.from({ length: 30 }, () => candidates).flat();
		const pool = (await import(
			join(DIST, "parse-pool.js")
		)) as typeof import("../../../src/sources/directory/parse-pool.js");
		const withWorkers = await pool.parseAll(dir, many, { signal, workers: 2 });
		const without = await parseAll(dir, many, { signal, workers: 0 });
		expect(without.byWorkers).toBe(0);
		expect(withWorkers.outcomes.map(view)).toEqual(without.outcomes.map(view));
	});

	it("stops at an aborted signal", async () => {
		const aborted = AbortSignal.abort();
		await expect(parseAll(dir, candidates, { signal: aborted, workers: 0 })).rejects.toThrow();
	});
});
