/**
 * Whole certificate writes over the runtime socket, each one serialised per node and verified by reading
 * back: a stale transaction (crash, failed commit) is aborted first, a failed step aborts ours, and a
 * worker change during the write is reported as RUNTIME_RELOADED (the write reached a stopping worker).
 */
import { X509Certificate } from "node:crypto";
import { normaliseSerial } from "../../certificates/index.js";
import { CertificateeError, describeError } from "../../errors.js";
import { type CertDetail, normalisePem } from "./parse.js";
import type { CrtListEntryOptions, RuntimeClient } from "./socket.js";

/** What HAProxy holds after a verified write. */
export interface RuntimeWrite {
	detail: CertDetail;
	/** Name of a transaction left open by someone else that was aborted first. */
	abortedStale?: string;
	/** The certificate store was created by this write (`new ssl cert`). */
	created: boolean;
	/** A crt-list entry was added by this write. */
	addedToCrtList: boolean;
}

/** Replaces the content of an existing certificate store: set, commit, read back. */
export async function updateCertificate(
	client: RuntimeClient,
	name: string,
	pem: string,
): Promise<RuntimeWrite> {
	const [result] = await updateCertificates(client, [{ name, pem }]);
	if (result instanceof Error || result === undefined) throw result;
	return result;
}

/**
 * Replaces several existing certificate stores in one turn of the node's writer: the worker noted and a stale
 * transaction aborted once, then each certificate's `set` and `commit` written back to back (one transaction at
 * a time, in order; one that does not go through is aborted and written again the careful way), then the worker
 * compared and every certificate read back (reads pipelined) against `expected` (serial and SHA-1 of the leaf
 * the PEM holds; read from the PEM when not given). One result per item, in order: the write, or why it failed.
 */
export function updateCertificates(
	client: RuntimeClient,
	items: ReadonlyArray<{ name: string; pem: string; expected?: { serial: string; sha1: string } }>,
): Promise<Array<RuntimeWrite | CertificateeError>> {
	return client.exclusive(async () => {
		const results: Array<RuntimeWrite | CertificateeError | undefined> = items.map(() => undefined);
		const expected = items.map(({ name, pem, expected }, i) => {
			try {
				return expected ?? leafIdentity(pem, client.name, name);
			} catch (e) {
				results[i] = asError(client, e, name);
				return undefined;
			}
		});
		const before = await client.checkWorker();
		const abortedStale = await abortOpenTransaction(client);
		for (const [i, { name, pem }] of items.entries()) {
			if (results[i] !== undefined) continue;
			try {
				if (!(await client.setAndCommit(name, pem))) {
					await abortOpenTransaction(client);
					await client.setCert(name, pem);
					await client.commitCert(name);
				}
			} catch (e) {
				await abortOpenTransaction(client).catch(() => undefined);
				results[i] = asError(client, e, name);
			}
		}
		const reloaded = await workerChanged(client, before);
		const details = await Promise.all(
			items.map(({ name }, i) =>
				results[i] === undefined && reloaded === undefined ? client.showCert(name) : undefined,
			),
		);
		return items.map(({ name }, i) => {
			const done = results[i];
			if (done !== undefined) return done;
			if (reloaded !== undefined) return reloaded(name);
			const detail = details[i];
			const problem = readBackProblem(client, name, expected[i], detail);
			if (problem) return problem;
			return {
				detail: detail as CertDetail,
				...(abortedStale !== undefined ? { abortedStale } : {}),
				created: false,
				addedToCrtList: false,
			};
		});
	});
}

/**
 * Makes a new certificate live without reload: `new ssl cert` (unless the store exists), set, commit,
 * then `add ssl crt-list <crtList>` unless the list already references it. For a crt directory the list
 * is the directory path without trailing slash and `name` must start with it.
 */
export function addCertificate(
	client: RuntimeClient,
	name: string,
	pem: string,
	crtList: string,
	entry?: CrtListEntryOptions,
): Promise<RuntimeWrite> {
	return client.exclusive(() => write(client, name, pem, { list: crtList, entry: entry ?? {} }));
}

async function write(
	client: RuntimeClient,
	name: string,
	pem: string,
	add: { list: string; entry: CrtListEntryOptions },
): Promise<RuntimeWrite> {
	const expected = leafIdentity(pem, client.name, name);
	const before = await client.checkWorker();
	const abortedStale = await abortOpenTransaction(client);
	let created = false;
	let addedToCrtList = false;
	try {
		if ((await client.showCert(name)) === undefined) {
			await client.newCert(name);
			created = true;
		}
		await client.setCert(name, pem);
		await client.commitCert(name);
		const entries = (await client.showCrtList(add.list)) ?? [];
		if (!entries.some((e) => e.file === name)) {
			await client.addCrtListEntry(add.list, name, add.entry);
			addedToCrtList = true;
		}
	} catch (e) {
		await abortOpenTransaction(client).catch(() => undefined);
		if (created) await client.delCert(name).catch(() => undefined);
		throw e;
	}
	const reloaded = await workerChanged(client, before);
	if (reloaded !== undefined) throw reloaded(name);
	const detail = await client.showCert(name);
	const problem = readBackProblem(client, name, expected, detail);
	if (problem) throw problem;
	return { detail: detail as CertDetail, abortedStale, created, addedToCrtList };
}

/**
 * After writes: undefined when the worker is the one noted before them; else the error each write reports (it
 * reached a stopping worker; the new one serves the files on disk).
 */
async function workerChanged(
	client: RuntimeClient,
	before: { pid: number },
): Promise<((name: string) => CertificateeError) | undefined> {
	const after = await client.checkWorker();
	if (after.pid === before.pid) return undefined;
	return (name) =>
		new CertificateeError(
			"RUNTIME_RELOADED",
			`HAProxy on ${client.name} reloaded during the write of ${name} (worker ${before.pid} -> ${after.pid}); the new worker serves the files on disk`,
			{
				context: { endpoint: client.name, certificate: name, operation: "verify" },
				retryable: true,
				hint: "the write is retried on the new worker in the next cycle",
			},
		);
}

/** The read-back does not show the certificate written: the error; else undefined. */
function readBackProblem(
	client: RuntimeClient,
	name: string,
	expected: { serial: string; sha1: string } | undefined,
	detail: CertDetail | undefined,
): CertificateeError | undefined {
	if (detail && expected && detail.serial === expected.serial && detail.sha1 === expected.sha1)
		return undefined;
	return new CertificateeError(
		"RUNTIME_COMMAND_FAILED",
		`read-back of ${name} on ${client.name} shows serial ${detail?.serial ?? "(none)"}, expected ${expected?.serial}`,
		{ context: { endpoint: client.name, certificate: name, operation: "show ssl cert" } },
	);
}

function asError(client: RuntimeClient, e: unknown, name: string): CertificateeError {
	if (e instanceof CertificateeError) return e;
	return new CertificateeError(
		"RUNTIME_COMMAND_FAILED",
		`${client.name}: writing ${name} failed: ${describeError(e)}`,
		{
			context: { endpoint: client.name, certificate: name, operation: "set ssl cert" },
			cause: e,
		},
	);
}

/** Aborts whatever transaction is open on the node; returns its name. */
export async function abortOpenTransaction(client: RuntimeClient): Promise<string | undefined> {
	const { transaction } = await client.showCerts();
	if (transaction === undefined) return undefined;
	await client.abortCert(transaction);
	return transaction;
}

/** Serial and SHA-1 of the first certificate in a PEM, as HAProxy prints them. */
function leafIdentity(pem: string, endpoint: string, name: string): { serial: string; sha1: string } {
	const block = /-----BEGIN CERTIFICATE-----\n[\s\S]*?\n-----END CERTIFICATE-----/.exec(normalisePem(pem));
	try {
		if (!block) throw new Error("no certificate block");
		const cert = new X509Certificate(block[0]);
		return {
			serial: normaliseSerial(cert.serialNumber),
			sha1: cert.fingerprint.replaceAll(":", "").toUpperCase(),
		};
	} catch (cause) {
		throw new CertificateeError(
			"BUNDLE_BAD_CERTIFICATE",
			`the PEM for ${name} holds no readable certificate`,
			{
				context: { endpoint, certificate: name, operation: "set ssl cert" },
				cause,
			},
		);
	}
}
