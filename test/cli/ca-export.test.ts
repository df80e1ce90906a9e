/** `certificatee ca export` as a child process: the local CA's root PEM, or an error naming the sources. */
import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { createTestCa } from "../harness/certs.js";

const run = promisify(execFile);
const cli = join(import.meta.dirname, "../../dist/cli/main.js");
const dir = mkdtempSync(join(tmpdir(), "certificatee-ca-export-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function certificatee(args: string[]) {
	try {
		const r = await run(process.execPath, [cli, ...args], { cwd: dir });
		return { code: 0, stdout: r.stdout, stderr: r.stderr };
	} catch (e) {
		const err = e as { code: number; stdout: string; stderr: string };
		return { code: err.code, stdout: err.stdout, stderr: err.stderr };
	}
}

function config(name: string, sources: string[]): string {
	const file = join(dir, `${name}.yaml`);
	writeFileSync(
		file,
		[`state_dir: ${join(dir, "state")}`, "sources:", ...sources.map((s) => `  - ${s}`), ""].join("\n"),
	);
	return file;
}

describe("cli/ca export (the built CLI as a child process)", () => {
	it("prints the root of the first local-ca source, the same one every time, the one it signs with", async () => {
		const f = config("two", [
			"{ name: files, type: directory, path: /nonexistent }",
			"{ name: internal, type: local-ca, ca_common_name: Internal Test CA }",
			"{ name: other, type: local-ca, ca_common_name: Other Test CA }",
		]);
		const r = await certificatee(["ca", "export", "--config", f]);
		expect(r.code).toBe(0);
		expect(r.stdout).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n$/);
		expect(r.stdout).not.toContain("PRIVATE KEY");
		const root = new X509Certificate(r.stdout);
		expect(root.ca).toBe(true);
		expect(root.subject).toContain("CN=Internal Test CA");
		expect(root.verify(root.publicKey)).toBe(true);
		// The CA it created on first use is the one kept in the state store (authorities/internal, 0600).
		const file = join(dir, "state", "authorities", "internal.json");
		expect(statSync(file).mode & 0o777).toBe(0o600);
		const stored = (JSON.parse(readFileSync(file, "utf8")) as { value: { certPem: string } }).value.certPem;
		expect(new X509Certificate(stored).fingerprint256).toBe(root.fingerprint256);
		expect((await certificatee(["ca", "export", "--config", f])).stdout).toBe(r.stdout);
		const other = await certificatee(["ca", "export", "--source", "other", "--config", f]);
		expect(new X509Certificate(other.stdout).subject).toContain("CN=Other Test CA");
	});

	it("a state directory laid out the old way (local-ca/<name>/ca.crt, ca.key): the same root, moved into the store", async () => {
		const ca = await createTestCa("Old Layout Test CA");
		const old = join(dir, "old-state", "local-ca", "internal");
		mkdirSync(old, { recursive: true });
		writeFileSync(join(old, "ca.crt"), ca.certPem, { mode: 0o644 });
		writeFileSync(join(old, "ca.key"), ca.keyPem, { mode: 0o600 });
		const f = join(dir, "old.yaml");
		writeFileSync(
			f,
			`state_dir: ${join(dir, "old-state")}\nsources:\n  - { name: internal, type: local-ca }\n`,
		);
		const r = await certificatee(["ca", "export", "--config", f]);
		expect(r.code, r.stderr).toBe(0);
		expect(new X509Certificate(r.stdout).fingerprint256).toBe(new X509Certificate(ca.certPem).fingerprint256);
		expect(existsSync(join(dir, "old-state", "local-ca"))).toBe(false);
		const record = join(dir, "old-state", "authorities", "internal.json");
		expect(statSync(record).mode & 0o777).toBe(0o600);
		expect(r.stdout + r.stderr).not.toContain("PRIVATE KEY");
	});

	it("fails naming the local-ca sources there are, or saying there is none", async () => {
		const none = config("none", ["{ name: files, type: directory, path: /nonexistent }"]);
		const r = await certificatee(["ca", "export", "--config", none]);
		expect(r.code).toBe(1);
		expect(r.stdout).toBe("");
		expect(r.stderr).toContain("no local-ca source is configured");
		expect(r.stderr).toContain("local-ca sources: none");
		const one = config("one", ["{ name: internal, type: local-ca }"]);
		const wrong = await certificatee(["ca", "export", "--source", "nope", "--config", one]);
		expect(wrong.code).toBe(1);
		expect(wrong.stderr).toContain('no local-ca source named "nope"');
		expect(wrong.stderr).toContain("local-ca sources: internal");
	});
});
