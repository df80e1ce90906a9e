/**
 * The issuer's ACME account: registered once and shared by concurrent operations, its contact kept up to date,
 * its key rolled over (RFC 8555 §7.3.5) with the new key stored before the CA switches.
 */
import acme from "acme-client";
import { Secret } from "../../certificates/types.js";
import type { IssuerContext } from "./issuer-context.js";
import { toAcmeError } from "./problem.js";
import type { SessionHttpClient } from "./session.js";
import type { TransportContext } from "./transport.js";

export interface Account {
	key: Secret;
	url: string;
}

/** The account shared by every operation, and a way to swap it after a key rollover. */
export interface AccountHolder {
	ensure(signal: AbortSignal): Promise<Account>;
	replace(account: Account): void;
}

/**
 * One registration shared by concurrent operations; it has its own deadline, so one caller giving up
 * does not fail the others (each caller stops waiting on its own signal). A failure is not kept.
 */
export function accountHolder(ctx: IssuerContext): AccountHolder {
	let account: Promise<Account> | undefined;
	return {
		ensure(signal) {
			account ??= registerAccount(ctx, AbortSignal.timeout(ctx.config.timeout)).catch((e: unknown) => {
				account = undefined;
				throw e;
			});
			const shared = account;
			return new Promise<Account>((resolve, reject) => {
				const onAbort = () => reject(signal.reason);
				if (signal.aborted) return onAbort();
				signal.addEventListener("abort", onAbort, { once: true });
				shared.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
			});
		},
		replace(next) {
			account = Promise.resolve(next);
		},
	};
}

/** A stored account without a recorded contact predates this field: push the configured one once. */
function sameContact(stored: readonly string[] | undefined, wanted: readonly string[]): boolean {
	return stored !== undefined && stored.length === wanted.length && stored.every((c, i) => c === wanted[i]);
}

/** The stored account (its contact brought up to date), or a new one registered with a key stored first. */
async function registerAccount(ictx: IssuerContext, signal: AbortSignal): Promise<Account> {
	const { config, directoryUrl, store, logger, newClient } = ictx;
	const ctx: TransportContext = { signal, problems: [] };
	try {
		const stored = await store.load();
		const contact = config.email ? [`mailto:${config.email}`] : [];
		if (stored?.accountUrl && stored.directoryUrl === directoryUrl) {
			if (!sameContact(stored.contact, contact)) {
				// The operator changed `email`: the CA's expiry and policy mail must follow (RFC 8555 §7.3.2).
				await newClient(stored.key, stored.accountUrl, ctx).updateAccount({ contact });
				await store.save({ ...stored, contact });
				logger.info(
					{ issuer: config.name, account: stored.accountUrl, contact },
					"ACME account contact updated",
				);
			}
			return { key: stored.key, url: stored.accountUrl };
		}
		const key = stored?.key ?? new Secret((await acme.crypto.createPrivateEcdsaKey("P-256")).toString());
		// The key is on disk before the CA knows it: after a crash, the same key finds the same account.
		if (!stored) await store.save({ key });
		const client = newClient(key, undefined, ctx);
		await client.createAccount({
			termsOfServiceAgreed: config.agree_tos,
			...(contact.length > 0 ? { contact } : {}),
		});
		const url = client.getAccountUrl();
		await store.save({ key, directoryUrl, accountUrl: url, contact });
		logger.info({ issuer: config.name, directory: directoryUrl, account: url }, "ACME account registered");
		return { key, url };
	} catch (e) {
		throw toAcmeError(e, {
			operation: "account registration",
			endpoint: directoryUrl,
			problems: ctx.problems,
			signal,
		});
	}
}

/** RFC 8555 §7.3.5 keyChange; the new key is stored before the CA switches, so a crash cannot lose it. */
export async function rolloverAccountKey(
	ictx: IssuerContext,
	accounts: AccountHolder,
	outer: AbortSignal,
): Promise<string> {
	const { config, store, newClient } = ictx;
	const signal = AbortSignal.any([outer, AbortSignal.timeout(config.timeout)]);
	const ctx: TransportContext = { signal, problems: [] };
	try {
		const { key, url } = await accounts.ensure(signal);
		const stored = await store.load();
		const nextKey = new Secret((await acme.crypto.createPrivateEcdsaKey("P-256")).toString());
		// On disk first: if the CA switches and we crash before the swap below, the new key is not lost.
		await store.save({ ...stored, key, nextKey });
		const oldClient = newClient(key, url, ctx);
		const nextClient = newClient(nextKey, url, ctx);
		// acme-client's updateAccountKey builds an HTTP client that bypasses our transport (trust, retries,
		// timeouts), so the two JWS are built here with the session's signing code instead.
		const next = internals(nextClient);
		const keyChangeUrl = await next.http.getResourceUrl("keyChange");
		const body = next.http.createSignedBody(keyChangeUrl, {
			account: url,
			oldKey: internals(oldClient).http.getJwk(),
		});
		await internals(oldClient).api.updateAccountKey(body);
		const { nextKey: _n, ...rest } = { ...stored, key, nextKey };
		await store.save({ ...rest, key: nextKey });
		accounts.replace({ key: nextKey, url });
		ictx.logger.info({ issuer: config.name, account: url }, "ACME account key rolled over");
		return url;
	} catch (e) {
		throw toAcmeError(e, {
			operation: "key rollover",
			endpoint: ictx.directoryUrl,
			problems: ctx.problems,
			signal,
		});
	}
}

interface ClientInternals {
	http: SessionHttpClient;
	api: { updateAccountKey(body: object): Promise<unknown> };
}

/** The session client and acme-client 5.4's AcmeApi, for keyChange (see rolloverKey). */
function internals(client: acme.Client): ClientInternals {
	return client as unknown as ClientInternals;
}
