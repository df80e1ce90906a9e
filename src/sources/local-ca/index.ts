/**
 * The embedded local CA: on first use it creates an ECDSA P-256 root in `<state_dir>/local-ca/<name>/`
 * (ca.crt 0644, ca.key 0600, both written in a temporary directory that is renamed into place, so a crash
 * never leaves half a CA), then signs leaf certificates directly with it. Clients trust it through exportRoot().
 */
import "reflect-metadata";
import { randomBytes, webcrypto } from "node:crypto";
import { mkdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import * as x509 from "@peculiar/x509";
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import { syncDir, writeFileAtomic } from "../../store/atomic-file.js";
import type { IssuedPem, IssueRequest, Issuer, KeyType } from "../types.js";

import { type LocalCaSourceConfig, localCaSourceSchema } from "./schema.js";

export { type LocalCaSourceConfig, localCaSourceSchema };

const crypto = webcrypto as Crypto;
const CA_ALGORITHM = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGNING = { name: "ECDSA", hash: "SHA-256" } as const;

export interface LocalCaDeps {
	stateDir: string;
	/** Dates of issued certificates; defaults to the system clock. */
	clock?: () => Date;
}

export interface LocalCaIssuer extends Issuer {
	/** The CA certificate (PEM) clients should trust; creates the CA when it does not exist yet. */
	exportRoot(): Promise<string>;
}

interface Ca {
	cert: x509.X509Certificate;
	certPem: string;
	key: CryptoKey;
}

function keyParams(keyType: KeyType): EcKeyGenParams | RsaHashedKeyGenParams {
	switch (keyType) {
		case "ecdsa-p256":
			return { name: "ECDSA", namedCurve: "P-256" };
		case "ecdsa-p384":
			return { name: "ECDSA", namedCurve: "P-384" };
		case "rsa-2048":
		case "rsa-4096":
			return {
				name: "RSASSA-PKCS1-v1_5",
				modulusLength: keyType === "rsa-2048" ? 2048 : 4096,
				publicExponent: new Uint8Array([1, 0, 1]),
				hash: "SHA-256",
			};
	}
}

/** 16 random bytes, positive and without a leading zero byte. */
function serial(): string {
	const bytes = randomBytes(16);
	bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x10;
	return bytes.toString("hex");
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
	return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

async function loadCa(dir: string): Promise<Ca | undefined> {
	let certPem: string;
	let keyPem: string;
	try {
		[certPem, keyPem] = await Promise.all([
			readFile(join(dir, "ca.crt"), "utf8"),
			readFile(join(dir, "ca.key"), "utf8"),
		]);
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw e;
	}
	const corrupt = (file: string, e: unknown) =>
		new CertificateeError(
			"STATE_CORRUPT",
			`${join(dir, file)} is not a valid CA ${file === "ca.key" ? "key" : "certificate"}: ${describeError(e)}`,
			{
				context: { file: join(dir, file) },
				hint: `restore ${file} from a backup; or delete ${dir} to create a new CA (clients must then trust the new ca.crt)`,
				cause: e,
			},
		);
	let key: CryptoKey;
	try {
		const der = x509.PemConverter.decodeFirst(keyPem);
		key = await crypto.subtle.importKey("pkcs8", der, CA_ALGORITHM, false, ["sign"]);
	} catch (e) {
		throw corrupt("ca.key", e);
	}
	let cert: x509.X509Certificate;
	try {
		cert = new x509.X509Certificate(certPem);
	} catch (e) {
		throw corrupt("ca.crt", e);
	}
	return { cert, certPem, key };
}

async function createCa(dir: string, config: LocalCaSourceConfig, now: Date): Promise<Ca> {
	const keys = (await crypto.subtle.generateKey(CA_ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
	const cert = await x509.X509CertificateGenerator.createSelfSigned(
		{
			serialNumber: serial(),
			name: `CN=${config.ca_common_name.replace(/[,=+<>#;\\"]/g, " ")}`,
			notBefore: new Date(now.getTime() - 60_000),
			notAfter: new Date(now.getTime() + config.ca_lifetime),
			keys,
			signingAlgorithm: SIGNING,
			extensions: [
				new x509.BasicConstraintsExtension(true, 0, true),
				new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
				await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
			],
		},
		crypto,
	);
	const parent = join(dir, "..");
	await mkdir(parent, { recursive: true, mode: 0o700 });
	const temp = join(parent, `.tmp-ca-${config.name}-${randomBytes(4).toString("hex")}`);
	await mkdir(temp, { mode: 0o700 });
	try {
		await writeFileAtomic(join(temp, "ca.key"), await exportKeyPem(keys.privateKey), 0o600);
		await writeFileAtomic(join(temp, "ca.crt"), cert.toString("pem"), 0o644);
		await rename(temp, dir);
		await syncDir(parent);
	} catch (e) {
		// Another process (`certificatee ca export` beside the daemon) created it first: use that one.
		const code = (e as NodeJS.ErrnoException).code;
		const existing = code === "ENOTEMPTY" || code === "EEXIST" ? await loadCa(dir) : undefined;
		if (existing) return existing;
		throw e;
	} finally {
		await rm(temp, { recursive: true, force: true });
	}
	return { cert, certPem: cert.toString("pem"), key: keys.privateKey };
}

async function issueLeaf(ca: Ca, request: IssueRequest, notBefore: Date, notAfter: Date): Promise<IssuedPem> {
	const keys = (await crypto.subtle.generateKey(keyParams(request.keyType), true, [
		"sign",
		"verify",
	])) as CryptoKeyPair;
	const sans = request.domains.map((name) =>
		/^[0-9.]+$/.test(name) || name.includes(":")
			? { type: "ip" as const, value: name }
			: { type: "dns" as const, value: name },
	);
	const usage =
		request.keyType.startsWith("rsa") === true
			? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
			: x509.KeyUsageFlags.digitalSignature;
	const cert = await x509.X509CertificateGenerator.create(
		{
			serialNumber: serial(),
			subject: `CN=${(request.domains[0] ?? request.certificate).replace(/[,=+<>#;\\"]/g, " ")}`,
			issuer: ca.cert.subject,
			notBefore,
			notAfter,
			publicKey: keys.publicKey,
			signingKey: ca.key,
			signingAlgorithm: SIGNING,
			extensions: [
				new x509.BasicConstraintsExtension(false, undefined, true),
				new x509.KeyUsagesExtension(usage, true),
				new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
				new x509.SubjectAlternativeNameExtension(sans),
				await x509.AuthorityKeyIdentifierExtension.create(ca.cert, false, crypto),
				await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
			],
		},
		crypto,
	);
	return { certPem: cert.toString("pem"), chainPem: "", keyPem: await exportKeyPem(keys.privateKey) };
}

export function createLocalCaIssuer(config: LocalCaSourceConfig, deps: LocalCaDeps): LocalCaIssuer {
	const dir = join(deps.stateDir, "local-ca", config.name);
	const clock = deps.clock ?? (() => new Date());
	let ca: Promise<Ca> | undefined;

	function ensureCa(): Promise<Ca> {
		ca ??= (async () => (await loadCa(dir)) ?? (await createCa(dir, config, clock())))();
		// A failure (unwritable directory) must not stick: the next call tries again.
		ca.catch(() => {
			ca = undefined;
		});
		return ca;
	}

	return {
		name: config.name,
		async issue(request, signal) {
			signal.throwIfAborted();
			try {
				const authority = await ensureCa();
				const lifetime = request.lifetimeMs ?? config.lifetime;
				// Backdate a little for clock skew, but never by more than a tenth of a short demo lifetime.
				const now = clock().getTime();
				const notBefore = new Date(now - Math.min(60_000, Math.floor(lifetime / 10)));
				return await issueLeaf(authority, request, notBefore, new Date(now + lifetime));
			} catch (e) {
				if (isCertificateeError(e, "STATE_CORRUPT")) throw e; // names ca.key or ca.crt and says what to do
				throw new CertificateeError(
					"ISSUE_FAILED",
					`local CA "${config.name}" could not issue "${request.certificate}": ${describeError(e)}`,
					{
						context: { certificate: request.certificate, file: dir },
						hint: "check that the state directory is writable and on a local filesystem",
						retryable: true,
						cause: e,
					},
				);
			}
		},
		async exportRoot() {
			return (await ensureCa()).certPem;
		},
		async revoke(certPem, reason, signal) {
			signal.throwIfAborted();
			// A private CA has no CRL or OCSP responder here: the revocation is recorded for the operator to act on.
			const cert = new x509.X509Certificate(certPem);
			const file = join(dir, "revoked.json");
			const previous = await readFile(file, "utf8").then(
				(t) => JSON.parse(t) as unknown[],
				() => [],
			);
			const entry = {
				serial: cert.serialNumber,
				subject: cert.subject,
				reason,
				revokedAt: clock().toISOString(),
			};
			await mkdir(dir, { recursive: true, mode: 0o700 });
			await writeFileAtomic(file, `${JSON.stringify([...previous, entry], null, 2)}\n`, 0o600);
		},
	};
}
