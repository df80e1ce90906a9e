import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDesiredLoader } from "../../src/desired/index.js";
import { certificateSpecSchema } from "../../src/renewal/schema.js";
import { createDirectorySource, directorySourceSchema } from "../../src/sources/directory/index.js";
import { createLocalCaIssuer, localCaSourceSchema } from "../../src/sources/local-ca/index.js";
import { type FileStore, openFileStore } from "../../src/store/file-store.js";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";

const signal = new AbortController().signal;
let dir: string;
let store: FileStore;
beforeEach(async () => {
	dir = await mkdtemp(join(tmpdir(), "certificatee-desired-"));
	store = await openFileStore(join(dir, "state"));
});
afterEach(async () => {
	store.close();
	await rm(dir, { recursive: true, force: true });
});

describe("desired", () => {
	it("merges sources and issued certificates; plan mode orders nothing; a duplicate name is reported", async () => {
		const ca = await createTestCa();
		await writeFile(join(dir, "web.pem"), (await issueTestLeaf(ca, { names: ["web.test"] })).combinedPem);
		const source = createDirectorySource(
			directorySourceSchema.parse({ name: "files", type: "directory", path: dir }),
		);
		const issuer = createLocalCaIssuer(localCaSourceSchema.parse({ name: "local", type: "local-ca" }), {
			store,
		});
		const certificates = ["web", "api"].map((name) =>
			certificateSpecSchema.parse({ name, domains: [`${name}.test`], issuer: "local" }),
		);
		const deps = {
			sources: [source],
			renewal: { store, issuers: new Map([["local", issuer]]), certificates },
			now: () => new Date(),
		};

		const planned = await createDesiredLoader(deps, { order: false })(signal);
		expect(planned.certificates.map((c) => c.name)).toEqual(["web"]);
		expect(planned.renewal.map((s) => [s.name, s.ordered, s.decision.action])).toEqual([
			["web", false, "renew-now"],
			["api", false, "renew-now"],
		]);
		expect(await store.list("")).toEqual([]);

		const synced = await createDesiredLoader(deps, { order: true })(signal);
		expect(synced.certificates.map((c) => [c.name, c.origin.split(":")[0]])).toEqual([
			["web", "source files"],
			["api", "issuer local"],
		]);
		expect(synced.problems.map((p) => p.error.code)).toEqual(["SOURCE_DUPLICATE_NAME"]);
		expect(await store.list("certificates/")).toEqual(["certificates/api", "certificates/web"]);
	});
});
