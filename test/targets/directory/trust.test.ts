/**
 * trust_store on a directory target: a chain that does not verify is never written (the set on disk keeps the
 * old certificate), reported as the HAProxy targets report it; the fixed one is written the next cycle.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import { loadTrustStore } from "../../../src/certificates/trust.js";
import { endpointFailures } from "../../../src/reconcile/failures.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import type { EndpointReport } from "../../../src/reconcile/report.js";
import { directoryTargetSchema } from "../../../src/targets/directory/index.js";
import { createDirectoryRunner } from "../../../src/targets/directory/runner.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../harness/certs.js";

let root: TestIssuer;
let intermediate: TestIssuer;
const dir = mkdtempSync(join(tmpdir(), "directory-trust-"));

beforeAll(async () => {
	root = await createTestCa("dir trust root");
	intermediate = await createTestCa("dir trust intermediate", { issuer: root });
	writeFileSync(join(dir, "roots.pem"), root.certPem);
});

const issue = () => issueTestLeaf(root, { names: ["files.example"], intermediates: [intermediate] });
const want = (leaf: TestLeaf, chain = leaf.chainPem): DesiredCertificate => ({
	name: "files",
	names: ["files.example"],
	bundle: parseBundle({ cert: leaf.certPem, chain, key: leaf.keyPem }, { source: "test" }),
	origin: "test",
});

describe("directory target: trust_store", () => {
	it("holds back a chain missing its intermediate, then writes the fixed one", async () => {
		const config = directoryTargetSchema.parse({ name: "files", type: "directory", path: join(dir, "out") });
		const runner = createDirectoryRunner(config, {}, () => new Date(), {
			trust: loadTrustStore(join(dir, "roots.pem"), "targets.files.trust_store"),
		});
		const signal = new AbortController().signal;
		const run = async (d: DesiredCertificate) =>
			(await runner.run([d], "sync", signal)).endpoints[0] as EndpointReport;
		const v1 = await issue();
		expect((await run(want(v1))).steps.every((s) => s.result === "ok")).toBe(true);
		const files = () =>
			Object.fromEntries(
				readdirSync(join(dir, "out", "files")).map((f) => [
					f,
					readFileSync(join(dir, "out", "files", f), "utf8"),
				]),
			);
		const before = files();
		const broken = await issue();
		const e = await run(want(broken, ""));
		expect(e.steps.map((s) => s.result)).toEqual(["skipped"]);
		expect(e.steps[0]?.note).toMatch(
			/^CHAIN_UNTRUSTED: certificate files: the chain ends at CN=files.example/,
		);
		expect(endpointFailures(e)[0]).toMatchObject({
			kind: "trust",
			code: "CHAIN_UNTRUSTED",
			certificate: "files",
		});
		expect(files()).toEqual(before);
		const fixed = await issue();
		const f = await run(want(fixed));
		expect(f.steps.map((s) => s.result)).toEqual(["ok"]);
		expect(f.held).toBeUndefined();
		expect(files()).not.toEqual(before);
	});
});
