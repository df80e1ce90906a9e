/**
 * The storage side of a haproxy-runtime target: one combined PEM per certificate in crt_dir.
 * Writes are atomic (dot-named temp file, which HAProxy's directory loading skips; fsync; rename;
 * fsync of the directory) and private (0600).
 */
import { randomBytes, X509Certificate } from "node:crypto";
import { open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { basename, join } from "node:path";
import { chainFingerprints, commonName, describeCertificate } from "../../certificates/index.js";
import { CertificateeError } from "../../errors.js";
import type { RefMeta } from "../../reconcile/model.js";

// HAProxy's `crt <dir>` skips these companions; so do we.
const COMPANION = /\.(key|ocsp|issuer|sctl)$/;

/** Parsed files by ref, reused while a file's inode, size and times are unchanged. */
export type CrtDirCache = Map<string, { stamp: string; meta: RefMeta }>;

/**
 * Every certificate file in crt_dir (file name = ref) with what its leaf says; unreadable files have an
 * empty meta. With a cache, unchanged files cost one stat instead of a read and an X.509 parse.
 */
export async function readCrtDir(dir: string, cache: CrtDirCache = new Map()): Promise<Map<string, RefMeta>> {
	const entries = await readdir(dir, { withFileTypes: true });
	const refs = new Map<string, RefMeta>();
	const files = entries.filter((e) => e.isFile() && !e.name.startsWith(".") && !COMPANION.test(e.name));
	await Promise.all(
		files.map(async (e) => {
			const path = join(dir, e.name);
			const s = await stat(path);
			const stamp = `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
			const cached = cache.get(e.name);
			if (cached?.stamp === stamp) {
				refs.set(e.name, cached.meta);
				return;
			}
			const meta = leafMeta(await readFile(path, "utf8"));
			cache.set(e.name, { stamp, meta });
			refs.set(e.name, meta);
		}),
	);
	for (const ref of cache.keys()) if (!refs.has(ref)) cache.delete(ref);
	return refs;
}

/** The leaf is the first certificate of a combined PEM (HAProxy's rule too); the others are its chain. */
export function leafMeta(pem: string): RefMeta {
	const blocks = pem.match(/-----BEGIN CERTIFICATE-----\r?\n[\s\S]*?-----END CERTIFICATE-----/g);
	if (!blocks?.[0]) return {};
	try {
		const [info, ...chain] = blocks.map((b) => describeCertificate(new X509Certificate(b)));
		if (info === undefined) return {};
		return {
			serial: info.serial,
			sha1: info.sha1,
			fingerprint: info.fingerprint,
			notAfter: info.notAfter,
			names: [...new Set([...info.dnsNames, ...info.ipAddresses])].sort(),
			keyType: info.keyType,
			chain: chainFingerprints(chain),
		};
	} catch {
		return {};
	}
}

/** The intermediates of a combined PEM as HAProxy lists them (subject and issuer CNs), leaf excluded. */
export function chainNames(pem: string): Array<{ subject: string; issuer: string }> {
	const blocks = pem.match(/-----BEGIN CERTIFICATE-----\r?\n[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
	return blocks.slice(1).map((b) => {
		const x = new X509Certificate(b);
		return { subject: commonName(x.subject), issuer: commonName(x.issuer) };
	});
}

/** A ref is a plain file name inside crt_dir. */
export function refPath(dir: string, ref: string): string {
	if (ref === "" || ref !== basename(ref) || ref.startsWith(".") || ref.includes("\0")) {
		throw new CertificateeError("RUNTIME_COMMAND_FAILED", `"${ref}" is not a file name inside ${dir}`, {
			context: { file: dir, ref, operation: "storage" },
			hint: "refs of a haproxy-runtime target are plain file names (no slash, not starting with a dot)",
		});
	}
	return join(dir, ref);
}

/** temp + fsync + rename + fsync(dir), mode 0600. */
export async function writeAtomic(dir: string, ref: string, content: string): Promise<void> {
	const target = refPath(dir, ref);
	const temp = join(dir, `.${ref}.certificatee-${randomBytes(6).toString("hex")}.tmp`);
	try {
		const handle = await open(temp, "wx", 0o600);
		try {
			await handle.writeFile(content);
			await handle.sync();
		} finally {
			await handle.close();
		}
		await rename(temp, target);
	} catch (cause) {
		await unlink(temp).catch(() => undefined);
		throw storageError(dir, ref, "write", cause);
	}
	await syncDir(dir);
}

/** Removes a ref's file; false when it was already gone. */
export async function removeFile(dir: string, ref: string): Promise<boolean> {
	try {
		await unlink(refPath(dir, ref));
	} catch (cause) {
		if ((cause as NodeJS.ErrnoException).code === "ENOENT") return false;
		throw storageError(dir, ref, "delete", cause);
	}
	await syncDir(dir);
	return true;
}

async function syncDir(dir: string): Promise<void> {
	const handle = await open(dir, "r");
	try {
		await handle.sync();
	} finally {
		await handle.close();
	}
}

function storageError(dir: string, ref: string, operation: string, cause: unknown): CertificateeError {
	return new CertificateeError(
		"ENDPOINT_ERROR",
		`cannot ${operation} ${join(dir, ref)}: ${(cause as Error).message}`,
		{ context: { file: join(dir, ref), ref, operation: `storage-${operation}` }, cause, retryable: true },
	);
}
