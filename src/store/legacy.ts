/**
 * The state directory as issuers laid it out before they kept their state in the store:
 *   acme/<issuer>/account.key, account.json, account.next.key   ->  accounts/<issuer>
 *   local-ca/<issuer>/ca.crt, ca.key, revoked.json               ->  authorities/<issuer>, revocations/<issuer>
 * When the file store opens with its lock, each old folder becomes its records (unless they already exist), then
 * its files are removed: the records are written atomically and synced first, so a crash in between only
 * repeats the removal at the next open. Once done, nothing is found. Only the file store has a past layout.
 */
import { readdir, readFile, rm, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { CertificateeError } from "../errors.js";
import {
	accountKey,
	authorityKey,
	revocationSchema,
	revocationsKey,
	writeAccountRecord,
	writeAuthorityRecord,
	writeRevocations,
} from "./records.js";
import type { StateStore } from "./types.js";

const accountMetaSchema = z.object({
	directory_url: z.string().optional(),
	account_url: z.string().optional(),
	contact: z.array(z.string()).optional(),
});

async function readIfExists(file: string): Promise<string | undefined> {
	try {
		return await readFile(file, "utf8");
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw new CertificateeError(
			"STATE_CORRUPT",
			`cannot read ${file}: ${(e as NodeJS.ErrnoException).code}`,
			{
				context: { file },
				hint: "check its permissions (certificatee moves it into the state store at start)",
			},
		);
	}
}

/** Parses an old JSON file; the parser's message is not kept (it may quote the file's text). */
function parseOld<T>(file: string, text: string, schema: z.ZodType<T>, hint: string): T {
	let json: unknown;
	try {
		json = JSON.parse(text);
	} catch {
		json = undefined;
	}
	const parsed = schema.safeParse(json);
	if (!parsed.success) {
		throw new CertificateeError("STATE_CORRUPT", `${file} is not valid`, { context: { file }, hint });
	}
	return parsed.data;
}

async function subfolders(dir: string): Promise<string[]> {
	try {
		const entries = await readdir(dir, { withFileTypes: true });
		return entries.filter((e) => e.isDirectory() && !e.name.startsWith(".")).map((e) => e.name);
	} catch {
		return [];
	}
}

/** Removes the old files, then their folders when empty (anything unexpected in them is left alone). */
async function removeOld(dir: string, files: string[]): Promise<void> {
	for (const f of files) await rm(join(dir, f), { force: true });
	for (const d of [dir, join(dir, "..")]) await rmdir(d).catch(() => undefined);
}

async function migrateAccount(dir: string, issuer: string, store: StateStore): Promise<boolean> {
	const keyPem = await readIfExists(join(dir, "account.key"));
	if (keyPem === undefined) return false;
	const metaFile = join(dir, "account.json");
	const metaText = await readIfExists(metaFile);
	const meta =
		metaText === undefined
			? {}
			: parseOld(
					metaFile,
					metaText,
					accountMetaSchema,
					"remove it; the account is looked up again with the same key",
				);
	const nextKeyPem = await readIfExists(join(dir, "account.next.key"));
	if (!(await store.get(accountKey(issuer)))) {
		const record = {
			keyPem,
			...(meta.directory_url ? { directoryUrl: meta.directory_url } : {}),
			...(meta.account_url ? { accountUrl: meta.account_url } : {}),
			...(meta.contact ? { contact: meta.contact } : {}),
			...(nextKeyPem ? { nextKeyPem } : {}),
		};
		await writeAccountRecord(store, issuer, record, 0);
	}
	await removeOld(dir, ["account.key", "account.json", "account.next.key"]);
	return true;
}

async function migrateAuthority(dir: string, issuer: string, store: StateStore): Promise<boolean> {
	const [certPem, keyPem] = [
		await readIfExists(join(dir, "ca.crt")),
		await readIfExists(join(dir, "ca.key")),
	];
	if (certPem === undefined || keyPem === undefined) return false;
	const revokedFile = join(dir, "revoked.json");
	const revokedText = await readIfExists(revokedFile);
	const revoked =
		revokedText === undefined
			? undefined
			: parseOld(
					revokedFile,
					revokedText,
					z.array(revocationSchema),
					"restore it from a backup, or delete it",
				);
	if (!(await store.get(authorityKey(issuer))))
		await writeAuthorityRecord(store, issuer, { certPem, keyPem }, 0);
	if (revoked && !(await store.get(revocationsKey(issuer))))
		await writeRevocations(store, issuer, { revoked }, 0);
	await removeOld(dir, ["ca.crt", "ca.key", "revoked.json"]);
	return true;
}

/** Moves what the old layout holds into `store` (the file store over `stateDir`); returns the keys it filled. */
export async function migrateLegacyLayout(stateDir: string, store: StateStore): Promise<string[]> {
	const migrated: string[] = [];
	for (const issuer of await subfolders(join(stateDir, "acme"))) {
		if (await migrateAccount(join(stateDir, "acme", issuer), issuer, store))
			migrated.push(accountKey(issuer));
	}
	for (const issuer of await subfolders(join(stateDir, "local-ca"))) {
		if (await migrateAuthority(join(stateDir, "local-ca", issuer), issuer, store))
			migrated.push(authorityKey(issuer));
	}
	return migrated;
}
