/**
 * The double's storage endpoints: real files in a directory HAProxy loads, with the server's own rules
 * (research/dpapi.md §2): sanitised names, PEM check with 500s, PUT never creates, DELETE refused with
 * 409 when haproxy.cfg names the file, and a runtime push (202 + Reload-ID when it fails) unless skip_reload.
 */
import { createPrivateKey, randomBytes, X509Certificate } from "node:crypto";
import { readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { sanitizeStorageName } from "../../../src/targets/haproxy-dataplane/client.js";
import type { DoubleContext, Handled } from "./context.js";
import { errorBody } from "./context.js";
import { overflow } from "./runtime.js";

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?-----END \1-----/g;

interface Pem {
	certs: X509Certificate[];
}

/** The certificates of a PEM file, or the x509 error of one that does not parse. */
function certificatesIn(text: string): X509Certificate[] | string {
	const certs: X509Certificate[] = [];
	for (const b of text.matchAll(PEM_BLOCK)) {
		if (b[1] !== "CERTIFICATE") continue;
		try {
			certs.push(new X509Certificate(b[0]));
		} catch (e) {
			return `x509: ${e instanceof Error ? e.message : String(e)}`;
		}
	}
	return certs;
}

/** client-native's validatePEM: a certificate and an RSA/ECDSA key, unencrypted, in one file. */
function validatePem(text: string): Pem | string {
	const blocks = [...text.matchAll(PEM_BLOCK)];
	const certs: X509Certificate[] = [];
	let key = false;
	for (const b of blocks) {
		const label = b[1] ?? "";
		if (label === "CERTIFICATE") {
			try {
				certs.push(new X509Certificate(b[0]));
			} catch {
				return "failed to parse certificate";
			}
		} else if (/^(RSA |EC )?PRIVATE KEY$/.test(label)) {
			try {
				const type = createPrivateKey(b[0]).asymmetricKeyType;
				if (type !== "rsa" && type !== "ec") return "failed to parse private key";
				key = true;
			} catch {
				return "failed to parse private key";
			}
		}
	}
	if (certs.length === 0 || !key) return "file should contain both certificate and private key";
	return { certs };
}

function cn(dn: string): string {
	return /(?:^|\n)CN=([^\n]*)/.exec(dn)?.[1] ?? "";
}

/** The metadata a v3.4 server reports for a storage file (dpapi.md §2.3). */
function metadata(name: string, file: string, size: number, pem: Pem): Record<string, unknown> {
	const leaf = pem.certs.find((c) => !c.ca) ?? pem.certs[0]!;
	const notBefore = Math.max(...pem.certs.map((c) => Date.parse(c.validFrom)));
	const notAfter = Math.min(...pem.certs.map((c) => Date.parse(c.validTo)));
	const domains = new Set<string>();
	const ips = new Set<string>();
	for (const c of pem.certs.filter((x) => !x.ca)) {
		if (cn(c.subject)) domains.add(cn(c.subject));
		for (const part of (c.subjectAltName ?? "").split(/,\s*/)) {
			if (part.startsWith("DNS:")) domains.add(part.slice(4));
			if (part.startsWith("IP Address:")) ips.add(part.slice(11));
		}
	}
	const issuers = new Set(pem.certs.map((c) => cn(c.issuer)).filter((x) => x !== ""));
	const body: Record<string, unknown> = {
		storage_name: name,
		file,
		description: "managed SSL file",
		size,
		not_before: new Date(notBefore).toISOString(),
		not_after: new Date(notAfter).toISOString(),
		serial: BigInt(`0x${leaf.serialNumber}`).toString(10),
		subject: cn(leaf.subject),
		issuers: [...issuers].join(", "),
		domains: [...domains].join(", "),
	};
	if (ips.size > 0) body.ip_addresses = [...ips].join(", ");
	return body;
}

async function exists(path: string): Promise<boolean> {
	return stat(path).then(
		() => true,
		() => false,
	);
}

/**
 * client-native writes storage files with renameio.WriteFile: a temp file `.<name><random>` in the same
 * directory, then rename. The leading dot matters: HAProxy skips dot files when it loads a `crt <dir>/`,
 * so a reload in the middle of a write never sees the temp file.
 */
async function writeAtomically(path: string, text: string): Promise<void> {
	const temp = join(dirname(path), `.${basename(path)}${randomBytes(6).toString("hex")}`);
	await writeFile(temp, text, { mode: 0o600 });
	await rename(temp, path);
}

export interface WriteFlags {
	skipReload: boolean;
	forceReload: boolean;
}

export function flagsOf(query: URLSearchParams): WriteFlags {
	return {
		skipReload: query.get("skip_reload") === "true",
		forceReload: query.get("force_reload") === "true",
	};
}

/** force_reload: the reload runs inside the request; a failed one is 400 "Reload failed: …", the file stays written. */
async function forcedReload(ctx: DoubleContext, ok: Handled): Promise<Handled> {
	try {
		await ctx.reload();
		return ok;
	} catch (e) {
		return errorBody(400, `Reload failed: ${e instanceof Error ? e.message : String(e)}`);
	}
}

/** After a file write: nothing, a forced reload, or a runtime push with a reload scheduled if it fails. */
async function afterWrite(
	ctx: DoubleContext,
	flags: WriteFlags,
	okStatus: number,
	body: Record<string, unknown>,
	push: () => Promise<void>,
): Promise<Handled> {
	if (flags.skipReload) return { status: okStatus, body };
	if (flags.forceReload) return forcedReload(ctx, { status: okStatus, body });
	try {
		await push();
		return { status: okStatus, body };
	} catch {
		return { status: 202, body, headers: { "Reload-ID": ctx.scheduleReload() } };
	}
}

export const storage = {
	/**
	 * Each item carries `file`, `storage_name` and `description` only, no size, date or serial (dataplaneapi
	 * handlers/storage/ssl_certificates/ssl_certificates.go GetAllStorageSSLCertificates over client-native
	 * storage/storage.go GetAll): certificatee's incremental observation relies on no more than that.
	 */
	async list(ctx: DoubleContext): Promise<Handled> {
		const items: Record<string, unknown>[] = [];
		for (const entry of (await readdir(ctx.storageDir, { withFileTypes: true })).sort((a, b) =>
			a.name.localeCompare(b.name),
		)) {
			if (!entry.isFile()) continue;
			const file = join(ctx.storageDir, entry.name);
			// The list silently skips files without both a certificate and a key.
			if (typeof validatePem(await readFile(file, "utf8")) === "string") continue;
			items.push({ file, storage_name: entry.name, description: "managed SSL file" });
		}
		return { status: 200, body: items };
	},

	async get(ctx: DoubleContext, rawName: string): Promise<Handled> {
		const name = sanitizeStorageName(rawName);
		const file = join(ctx.storageDir, name);
		if (!(await exists(file))) return errorBody(404, `file ${name} doesn't exist`);
		// GET reads whatever the file holds (ParseCertificatesInfo, no validatePEM): a certificate without its key
		// (a crt-store's `a.crt`) has its metadata, a key alone only its size.
		const text = await readFile(file, "utf8");
		const certs = certificatesIn(text);
		if (typeof certs === "string") return errorBody(500, certs);
		if (certs.length === 0) {
			return {
				status: 200,
				body: { storage_name: name, file, description: "managed SSL file", size: Buffer.byteLength(text) },
			};
		}
		return { status: 200, body: metadata(name, file, Buffer.byteLength(text), { certs }) };
	},

	async create(
		ctx: DoubleContext,
		upload: { filename: string; text: string },
		flags: WriteFlags,
	): Promise<Handled> {
		const name = sanitizeStorageName(upload.filename);
		const file = join(ctx.storageDir, name);
		if (await exists(file)) return errorBody(409, `file ${name} already exists`);
		const pem = validatePem(upload.text);
		if (typeof pem === "string") return errorBody(500, pem);
		await writeAtomically(file, upload.text);
		const body = metadata(name, file, Buffer.byteLength(upload.text), pem);
		return afterWrite(ctx, flags, 201, body, async () => {
			await ctx.runtime.newCert(file);
			if (overflow(ctx, "createStorageSSLCertificate", file, upload.text)) throw new Error("overflow");
			await ctx.runtime.setCert(file, upload.text);
			await ctx.runtime.commitCert(file);
		});
	},

	async replace(ctx: DoubleContext, rawName: string, text: string, flags: WriteFlags): Promise<Handled> {
		const name = sanitizeStorageName(rawName);
		const file = join(ctx.storageDir, name);
		if (!(await exists(file))) return errorBody(404, `file ${name} doesn't exist`);
		const pem = validatePem(text);
		if (typeof pem === "string") return errorBody(500, pem);
		await writeAtomically(file, text);
		const body = metadata(name, file, Buffer.byteLength(text), pem);
		return afterWrite(ctx, flags, 200, body, async () => {
			if (overflow(ctx, "replaceStorageSSLCertificate", file, text)) throw new Error("overflow");
			await ctx.runtime.setCert(file, text);
			await ctx.runtime.commitCert(file);
		});
	},

	async delete(ctx: DoubleContext, rawName: string, flags: WriteFlags): Promise<Handled> {
		const name = sanitizeStorageName(rawName);
		const file = join(ctx.storageDir, name);
		if (!(await exists(file))) return errorBody(404, `file ${name} doesn't exist`);
		const config = (await readFile(ctx.configFile, "utf8")).split("\n");
		const line = config.findIndex((l) => !l.trim().startsWith("#") && l.includes(file));
		if (line >= 0) {
			return errorBody(
				409,
				`rejecting attempt to delete file ${file} referenced in haproxy conf at line ${line + 1}: ${config[line]?.trim()}`,
			);
		}
		await rm(file);
		if (flags.skipReload) return { status: 204 };
		if (flags.forceReload) return forcedReload(ctx, { status: 204 });
		// The server sends the bare URL name, which HAProxy (naming certificates by path) rarely knows.
		try {
			await ctx.runtime.delCert(rawName);
			return { status: 204 };
		} catch {
			return { status: 202, headers: { "Reload-ID": ctx.scheduleReload() } };
		}
	},
};
