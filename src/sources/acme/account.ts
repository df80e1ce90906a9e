/**
 * Where an ACME issuer keeps its account: the key (created once, reused forever) and the account URL the CA
 * gave it, as the state store's `accounts/<issuer>` record (store/records.ts), so the same issuer code runs
 * over the file store now and an etcd store later. Behind a two-method interface the issuer uses.
 */
import { Secret } from "../../certificates/types.js";
import { type AccountRecord, readAccountRecord, writeAccountRecord } from "../../store/records.js";
import type { StateStore } from "../../store/types.js";

export interface StoredAccount {
	/** PEM of the account private key. */
	key: Secret;
	/** The directory the account is registered at; undefined until registration succeeded. */
	directoryUrl?: string;
	accountUrl?: string;
	/** The contact URIs last sent to the CA (mailto:...); a changed `email` is pushed to the account. */
	contact?: string[];
	/** During a key rollover: the new key, stored before the CA switches. */
	nextKey?: Secret;
}

/** load() returns undefined when no account was ever stored. save() is atomic. */
export interface AccountStore {
	load(): Promise<StoredAccount | undefined>;
	save(account: StoredAccount): Promise<void>;
}

function toRecord(account: StoredAccount): AccountRecord {
	return {
		keyPem: account.key.reveal(),
		...(account.directoryUrl ? { directoryUrl: account.directoryUrl } : {}),
		...(account.accountUrl ? { accountUrl: account.accountUrl } : {}),
		...(account.contact ? { contact: account.contact } : {}),
		...(account.nextKey ? { nextKeyPem: account.nextKey.reveal() } : {}),
	};
}

function fromRecord(record: AccountRecord): StoredAccount {
	return {
		key: new Secret(record.keyPem),
		...(record.directoryUrl ? { directoryUrl: record.directoryUrl } : {}),
		...(record.accountUrl ? { accountUrl: record.accountUrl } : {}),
		...(record.contact ? { contact: record.contact } : {}),
		...(record.nextKeyPem ? { nextKey: new Secret(record.nextKeyPem) } : {}),
	};
}

/** The account of `issuer` in `store`; save() writes only when something changed. */
export function storedAccount(store: StateStore, issuer: string): AccountStore {
	return {
		async load() {
			const record = await readAccountRecord(store, issuer);
			return record && fromRecord(record.value);
		},
		async save(account) {
			const current = await readAccountRecord(store, issuer);
			const next = toRecord(account);
			if (current && JSON.stringify(current.value) === JSON.stringify(next)) return;
			await writeAccountRecord(store, issuer, next, current?.version ?? 0);
		},
	};
}
