/**
 * Where an ACME issuer keeps its account: the key (created once, reused forever) and the account URL the CA
 * gave it. Behind a two-method interface so the state store (filesystem now, etcd later) can replace the
 * files here without touching the issuer.
 */
import { mkdir, readFile, rm } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { Secret } from "../../certificates/types.js";
import { CertificateeError } from "../../errors.js";
import { writeFileAtomic } from "../../store/atomic-file.js";

export interface StoredAccount {
	/** PEM of the account private key. */
	key: Secret;
	/** The directory the account is registered at; undefined until registration succeeded. */
	directoryUrl?: string;
	accountUrl?: string;
	/** The contact URIs last sent to the CA (mailto:...); a changed `email` is pushed to the account. */
	contact?: string[];
	/** During a key rollover: the new key, on disk before the CA switches (account.next.key). */
	nextKey?: Secret;
}

/** load() returns undefined when no account was ever stored. save() is atomic. */
export interface AccountStore {
	load(): Promise<StoredAccount | undefined>;
	save(account: StoredAccount): Promise<void>;
}

const metaSchema = z.object({
	directory_url: z.string().optional(),
	account_url: z.string().optional(),
	contact: z.array(z.string()).optional(),
});

async function readIfExists(file: string): Promise<string | undefined> {
	try {
		return await readFile(file, "utf8");
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
		throw new CertificateeError("STATE_CORRUPT", `cannot read ${file}: ${(e as Error).message}`, {
			context: { file },
			cause: e,
		});
	}
}

/**
 * The account as two files in `dir`: `account.key` (PEM, 0600) and `account.json` (directory and account
 * URL, 0600). Each is written atomically, and only when it changes.
 */
export function fileAccountStore(dir: string): AccountStore {
	const keyFile = path.join(dir, "account.key");
	const metaFile = path.join(dir, "account.json");
	const nextKeyFile = path.join(dir, "account.next.key");
	return {
		async load() {
			const keyPem = await readIfExists(keyFile);
			if (keyPem === undefined) return undefined;
			const metaText = await readIfExists(metaFile);
			let meta: z.infer<typeof metaSchema> = {};
			if (metaText !== undefined) {
				let json: unknown;
				try {
					json = JSON.parse(metaText);
				} catch {
					json = undefined;
				}
				const parsed = metaSchema.safeParse(json);
				if (!parsed.success) {
					throw new CertificateeError("STATE_CORRUPT", `${metaFile} is not a valid account record`, {
						context: { file: metaFile },
						hint: "remove it; the account is looked up again with the same key",
					});
				}
				meta = parsed.data;
			}
			return {
				key: new Secret(keyPem),
				...(meta.directory_url ? { directoryUrl: meta.directory_url } : {}),
				...(meta.account_url ? { accountUrl: meta.account_url } : {}),
				...(meta.contact ? { contact: meta.contact } : {}),
				...(await readIfExists(nextKeyFile).then((k) => (k ? { nextKey: new Secret(k) } : {}))),
			};
		},
		async save(account) {
			await mkdir(dir, { recursive: true, mode: 0o700 });
			const current = await this.load().catch(() => undefined);
			if (current?.key.reveal() !== account.key.reveal())
				await writeFileAtomic(keyFile, account.key.reveal());
			const meta = `${JSON.stringify({ directory_url: account.directoryUrl, account_url: account.accountUrl, contact: account.contact }, null, 2)}\n`;
			if ((await readIfExists(metaFile)) !== meta) await writeFileAtomic(metaFile, meta);
			if (account.nextKey) await writeFileAtomic(nextKeyFile, account.nextKey.reveal());
			else await rm(nextKeyFile, { force: true });
		},
	};
}
