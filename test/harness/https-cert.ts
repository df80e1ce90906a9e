/** A throwaway HTTPS CA and a localhost server certificate, made with the openssl CLI, for test servers. */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Writes ca.pem/ca.key and cert.pem/key.pem (CN and SAN localhost, 127.0.0.1) into `dir`. */
export async function makeHttpsCertificate(dir: string): Promise<void> {
	const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
	await run(
		"openssl",
		[
			"req",
			"-x509",
			...ec,
			"-keyout",
			"ca.key",
			"-out",
			"ca.pem",
			"-days",
			"30",
			"-subj",
			"/CN=certificatee pebble https CA",
			"-addext",
			"basicConstraints=critical,CA:TRUE",
			"-addext",
			"keyUsage=critical,keyCertSign,cRLSign",
		],
		{ cwd: dir },
	);
	await run("openssl", ["req", ...ec, "-keyout", "key.pem", "-out", "server.csr", "-subj", "/CN=localhost"], {
		cwd: dir,
	});
	await writeFile(
		path.join(dir, "server.ext"),
		"basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n" +
			"subjectAltName=DNS:localhost,IP:127.0.0.1\n",
	);
	await run(
		"openssl",
		[
			"x509",
			"-req",
			"-in",
			"server.csr",
			"-CA",
			"ca.pem",
			"-CAkey",
			"ca.key",
			"-CAcreateserial",
			"-out",
			"cert.pem",
			"-days",
			"30",
			"-extfile",
			"server.ext",
		],
		{ cwd: dir },
	);
}
