/**
 * A DER OCSP response ("good", valid a week) for a test leaf, signed by its issuer: what a `.ocsp` file beside a
 * certificate holds. Made by openssl's own responder (`openssl ocsp -index`), in a temporary directory.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { TestIssuer, TestLeaf } from "./certs.js";

const run = promisify(execFile);

export async function ocspResponse(issuer: TestIssuer, leaf: TestLeaf): Promise<Buffer> {
	const dir = await mkdtemp(join(tmpdir(), "certificatee-ocsp-"));
	try {
		const at = (f: string) => join(dir, f);
		await writeFile(at("ca.pem"), issuer.certPem);
		await writeFile(at("ca.key"), issuer.keyPem, { mode: 0o600 });
		await writeFile(at("leaf.pem"), leaf.certPem);
		// openssl's CA database: one valid certificate, by serial (expiry and subject are not read).
		await writeFile(at("index.txt"), `V\t301231000000Z\t\t${leaf.serial.toUpperCase()}\tunknown\t/CN=leaf\n`);
		await run("openssl", [
			"ocsp",
			...["-index", at("index.txt"), "-CA", at("ca.pem"), "-rsigner", at("ca.pem"), "-rkey", at("ca.key")],
			...["-issuer", at("ca.pem"), "-cert", at("leaf.pem"), "-respout", at("resp.der"), "-ndays", "7"],
		]);
		return await readFile(at("resp.der"));
	} finally {
		await rm(dir, { recursive: true, force: true });
	}
}
