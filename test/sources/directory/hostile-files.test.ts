/**
 * Issue 25, finding 2: whoever can write a source directory must not be able to hang or exhaust the daemon,
 * nor make it read a file it did not put there. A FIFO is never opened for a blocking read, a huge file is
 * never read, a symlink is never followed, and an adversarially ordered chain costs no quadratic signature
 * checks. The FIFO case runs the built CLI in a child: a blocked read would stop this process's loop too.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { MAX_BUNDLE_CERTIFICATES, parseBundle } from "../../../src/certificates/bundle.js";
import { createDirectorySource, directorySourceSchema } from "../../../src/sources/directory/index.js";
import type { SourceResult } from "../../../src/sources/types.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";
import { certificatee, ensureBuilt } from "../../harness/cli.js";

const signal = new AbortController().signal;
let ca: TestIssuer;
let good: TestLeaf;
let dir: string;
let outside: string;

beforeAll(async () => {
	ca = await createTestCa();
	good = await issueTestLeaf(ca, { names: ["good.test"] });
	await ensureBuilt();
});
beforeEach(() => {
	dir = mkdtempSync(join(tmpdir(), "certificatee-hostile-"));
	outside = mkdtempSync(join(tmpdir(), "certificatee-outside-"));
	writeFileSync(join(dir, "good.pem"), good.combinedPem);
});
afterEach(() => {
	rmSync(dir, { recursive: true, force: true });
	rmSync(outside, { recursive: true, force: true });
});

const load = (): Promise<SourceResult> =>
	createDirectorySource(directorySourceSchema.parse({ name: "certs", type: "directory", path: dir })).load(
		signal,
	);
const problems = (r: SourceResult) =>
	r.problems.map((p) => ({
		file: p.subject.replace(`${dir}/`, ""),
		code: p.error.code,
		message: p.error.message,
	}));

describe("sources/directory against hostile files", () => {
	it("a FIFO named like a bundle is reported, not read: validate finishes and serves the good file", async () => {
		execFileSync("mkfifo", [join(dir, "evil.pem")]);
		const config = join(outside, "config.yaml");
		writeFileSync(config, `sources:\n  - { name: certs, type: directory, path: ${dir} }\n`);
		const r = await certificatee(["validate", "--config", config], { timeoutMs: 20_000 });
		const out = `${r.stdout}${r.stderr}`;
		expect(out).toMatch(/evil\.pem is not a regular file \(a FIFO, socket or device\); not read/);
		expect(r.code).toBe(1);
	}, 30_000);

	it("a file over the 1 MiB limit is refused from its size, without being read", async () => {
		const huge = join(dir, "huge.pem");
		writeFileSync(huge, "");
		truncateSync(huge, 512 * 1024 * 1024); // sparse: costs no disk, and the old reader read it all
		const before = process.memoryUsage().rss;
		const r = await load();
		expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
		expect(problems(r)).toEqual([
			{
				file: "huge.pem",
				code: "BUNDLE_TOO_LARGE",
				message: `${huge}: ${512 * 1024 * 1024} bytes; the limit is 1048576 bytes; not read`,
			},
		]);
		expect(r.certificates.map((c) => c.name)).toEqual(["good"]);
	});

	it("a symlink to a bundle outside the directory is not followed, so its key is never served", async () => {
		const other = await issueTestLeaf(ca, { names: ["other.test"] });
		writeFileSync(join(outside, "other.pem"), other.combinedPem, { mode: 0o600 });
		symlinkSync(join(outside, "other.pem"), join(dir, "other.pem"));
		const r = await load();
		expect(r.certificates.map((c) => c.name)).toEqual(["good"]);
		expect(problems(r).map((p) => [p.file, p.code])).toEqual([["other.pem", "SOURCE_UNREADABLE"]]);
		expect(problems(r)[0]?.message).toContain("is a symlink; certificatee does not follow links");
	});

	it(`a bundle of more than ${MAX_BUNDLE_CERTIFICATES} certificates is refused before any signature check`, async () => {
		const chain = await chainOf(MAX_BUNDLE_CERTIFICATES + 8);
		const pem = bundlePem(chain, true);
		const error = (() => {
			try {
				parseBundle({ combined: pem }, { source: "long.pem" });
			} catch (e) {
				return e as Error & { code: string };
			}
		})();
		expect(error?.code).toBe("BUNDLE_TOO_LARGE");
		expect(error?.message).toBe(
			`long.pem: ${MAX_BUNDLE_CERTIFICATES + 9} certificates; the limit is ${MAX_BUNDLE_CERTIFICATES}`,
		);
	}, 60_000);

	it("a chain at the limit in the worst order is sorted leaf to root", async () => {
		const chain = await chainOf(MAX_BUNDLE_CERTIFICATES - 1);
		const started = performance.now();
		const bundle = parseBundle({ combined: bundlePem(chain, true) }, { source: "long.pem" });
		const ms = performance.now() - started;
		// Leaf first, then each issuer: the intermediates from the nearest to the root's child.
		expect(bundle.chain.map((c) => c.subjectCn)).toEqual(
			[...chain.intermediates].reverse().map((_, i) => `link ${chain.intermediates.length - 1 - i}`),
		);
		console.log(`${MAX_BUNDLE_CERTIFICATES} certificates, worst order: parsed in ${ms.toFixed(0)} ms`);
	}, 60_000);
});

interface Chain {
	leaf: TestLeaf;
	/** Root's child first ("link 0"), the leaf's issuer last. */
	intermediates: TestIssuer[];
}

/** A leaf under `n` intermediates in a line below one root. */
async function chainOf(n: number): Promise<Chain> {
	const intermediates: TestIssuer[] = [];
	let issuer = ca;
	for (let i = 0; i < n; i++) {
		issuer = await createTestCa(`link ${i}`, { issuer });
		intermediates.push(issuer);
	}
	return { leaf: await issueTestLeaf(issuer, { names: ["deep.test"] }), intermediates };
}

/** The leaf, its key and the intermediates root-side first: each step's issuer is the last one left. */
function bundlePem(chain: Chain, worstOrder: boolean): string {
	const links = chain.intermediates.map((i) => i.certPem);
	return [chain.leaf.certPem, ...(worstOrder ? links : links.reverse()), chain.leaf.keyPem].join("");
}
