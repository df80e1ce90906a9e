/**
 * The ACME account kept in the state store (record `acme-accounts/<issuer>`), in the shape of the acme
 * issuer's AccountStore (load/save of { key, directoryUrl?, accountUrl? }), so the daemon can pass it as
 * `accountStore` and the account follows the store to etcd later. Writes are compare-and-swap on the version
 * last loaded or saved: a second writer gets STATE_CONFLICT instead of silently replacing the account.
 */
import { Secret } from "../certificates/types.js";
import { readAcmeAccount, writeAcmeAccount } from "./records.js";
import type { StateStore } from "./types.js";

export interface StoredAcmeAccount {
	key: Secret;
	directoryUrl?: string;
	accountUrl?: string;
}

export interface StateAccountStore {
	load(): Promise<StoredAcmeAccount | undefined>;
	save(account: StoredAcmeAccount): Promise<void>;
}

export function stateAccountStore(store: StateStore, issuer: string): StateAccountStore {
	let version = 0;
	return {
		async load() {
			const record = await readAcmeAccount(store, issuer);
			if (!record) return undefined;
			version = record.version;
			const { keyPem, directoryUrl, accountUrl } = record.value;
			return {
				key: new Secret(keyPem),
				...(directoryUrl ? { directoryUrl } : {}),
				...(accountUrl ? { accountUrl } : {}),
			};
		},
		async save(account) {
			version = await writeAcmeAccount(
				store,
				issuer,
				{
					keyPem: account.key.reveal(),
					...(account.directoryUrl ? { directoryUrl: account.directoryUrl } : {}),
					...(account.accountUrl ? { accountUrl: account.accountUrl } : {}),
				},
				version,
			);
		},
	};
}
