import { beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import { fileSetFor, KEY_MODE, rootOf, setDirectory } from "../../../src/targets/directory/layouts.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";

let cert: DesiredCertificate;
let withRoot: DesiredCertificate;
let rootPem: string;

beforeAll(async () => {
	const ca = await createTestCa("layouts root");
	const inter = await createTestCa("layouts intermediate", { issuer: ca });
	const leaf = await issueTestLeaf(ca, { names: ["a.example"], intermediates: [inter] });
	rootPem = ca.certPem;
	const bundle = parseBundle({ cert: leaf.certPem, chain: leaf.chainPem, key: leaf.keyPem }, { source: "t" });
	const full = parseBundle(
		{ cert: leaf.certPem, chain: `${leaf.chainPem}\n${ca.certPem}`, key: leaf.keyPem },
		{ source: "t" },
	);
	cert = { name: "web", names: ["a.example"], bundle, origin: "test" };
	withRoot = { ...cert, bundle: full };
});

const base = { path: "/srv/tls", file_mode: 0o644 } as const;

describe("targets/directory/layouts", () => {
	it.each([
		[undefined, "/srv/tls/web"],
		[["web"], "/srv/tls"],
		[["web", "api"], "/srv/tls/web"],
	])("certificates %j put the set in %s", (certificates, want) => {
		expect(setDirectory("web", { path: "/srv/tls", certificates })).toBe(want);
	});

	it("kubernetes-tls: tls.crt is leaf + chain, tls.key is 0600, no ca.crt without a root", () => {
		const set = fileSetFor(cert, { ...base, layout: "kubernetes-tls" });
		expect(set.kind).toBe("directory");
		if (set.kind !== "directory") return;
		expect(Object.keys(set.files).sort()).toEqual(["tls.crt", "tls.key"]);
		expect(set.files["tls.crt"]).toEqual({ content: cert.bundle.fullchainPem, mode: 0o644 });
		expect(set.files["tls.key"]!.mode).toBe(KEY_MODE);
	});

	it("kubernetes-tls: ca.crt is the chain's root, or the configured CA", () => {
		expect(rootOf(cert.bundle)).toBeUndefined();
		const found = rootOf(withRoot.bundle);
		expect(found?.replace(/\s/g, "")).toBe(rootPem.replace(/\s/g, ""));
		const set = fileSetFor(cert, { ...base, layout: "kubernetes-tls" }, "CA PEM");
		expect(set.kind === "directory" && set.files["ca.crt"]?.content).toBe("CA PEM");
	});

	it("haproxy-pem: one file <name>.pem with leaf, chain and key, 0600", () => {
		const set = fileSetFor(cert, { ...base, layout: "haproxy-pem" });
		expect(set).toMatchObject({ kind: "file", path: "/srv/tls/web.pem", file: { mode: KEY_MODE } });
		if (set.kind === "file")
			expect(set.file.content).toBe(cert.bundle.fullchainPem + cert.bundle.key.reveal());
	});

	it("split: certbot's four files, the key 0600", () => {
		const set = fileSetFor(cert, { ...base, layout: "split", certificates: ["web"] });
		expect(set.path).toBe("/srv/tls");
		if (set.kind !== "directory") throw new Error("expected a directory set");
		expect(Object.entries(set.files).map(([n, f]) => [n, f.mode])).toEqual([
			["cert.pem", 0o644],
			["chain.pem", 0o644],
			["fullchain.pem", 0o644],
			["privkey.pem", 0o600],
		]);
	});

	it.each(["..", "a/b", ""])("refuses the certificate name %j as a file or directory name", (name) => {
		expect(() => fileSetFor({ ...cert, name }, { ...base, layout: "split" })).toThrow(/file name/);
	});
});
