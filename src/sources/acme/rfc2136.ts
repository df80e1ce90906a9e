/**
 * DNS-01 through RFC 2136 dynamic updates signed with TSIG, the protocol BIND, Knot, PowerDNS and Windows
 * DNS accept: `set` adds the TXT value and returns once every checked server answers it (by default the
 * zone's NS and `server`); `clear` deletes exactly that value (a name and its wildcard share one record
 * name, each value is removed on its own).
 */
import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import { secretFileExposure } from "../../base/secret-file.js";
import { CertificateeError, exposedSecret, rememberSecret } from "../../errors.js";
import {
	type DnsServer,
	exchangeTcp,
	formatDnsServer,
	normaliseName,
	parseDnsServer,
	parseResponse,
	queryMessage,
	type TxtChange,
	updateMessage,
} from "./dns-wire.js";
import type { DnsHook } from "./dns01.js";
import type { TsigAlgorithm } from "./schema.js";
import { sleep } from "./transport.js";
import { signMessage, type TsigKey, verifyResponse } from "./tsig.js";

/** `dns01.rfc2136` as the schema gives it (durations in ms). */
export interface Rfc2136Config {
	server: string;
	zone: string;
	tsig_key_name: string;
	tsig_algorithm: TsigAlgorithm;
	tsig_secret_file: string;
	ttl: number;
	timeout: number;
	propagation_timeout: number;
	check_servers?: string[] | undefined;
}

const FIELD = "dns01.rfc2136";

function secretError(file: string, why: string, cause?: unknown): CertificateeError {
	return new CertificateeError("CONFIG_SECRET_UNREADABLE", `${FIELD}.tsig_secret_file ${file} ${why}`, {
		context: { file, field: `${FIELD}.tsig_secret_file` },
		hint: 'the file holds the base64 secret of the TSIG key (the text in quotes after "secret" in `tsig-keygen` output), or that whole key file',
		cause,
	});
}

/** Reads the TSIG secret: bare base64, or a BIND key file (`tsig-keygen` output). Never returns it as text. */
export function readTsigSecret(file: string): Buffer {
	let text: string;
	try {
		text = readFileSync(file, "utf8");
	} catch (e) {
		throw secretError(
			file,
			`cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
			e,
		);
	}
	const exposed = secretFileExposure(file, `${FIELD}.tsig_secret_file`);
	if (exposed !== undefined) throw exposedSecret(file, `${FIELD}.tsig_secret_file`, exposed);
	const base64 = (/\bsecret\s+"([^"]*)"/.exec(text)?.[1] ?? text).replace(/\s+/g, "");
	if (base64.length === 0 || base64.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) {
		throw secretError(file, "does not hold a base64 secret");
	}
	rememberSecret(base64);
	return Buffer.from(base64, "base64");
}

/** The record name is the zone or inside it. */
function inZone(name: string, zone: string): boolean {
	const n = normaliseName(name);
	const z = normaliseName(zone);
	return n === z || n.endsWith(`.${z}`);
}

export function createRfc2136Publisher(
	config: Rfc2136Config,
	secret: Buffer,
	now: () => number = () => Math.floor(Date.now() / 1000),
): DnsHook {
	const server = parseDnsServer(config.server);
	const configuredChecks = config.check_servers?.map(parseDnsServer);
	const key: TsigKey = { name: config.tsig_key_name, algorithm: config.tsig_algorithm, secret };
	const zone = normaliseName(config.zone);
	const at = formatDnsServer(server);

	const fail = (what: string, message: string, hint: string, retryable: boolean, cause?: unknown) =>
		new CertificateeError("DNS_UPDATE_FAILED", `${what}: ${message}`, {
			context: { endpoint: at, field: FIELD, operation: what },
			hint,
			retryable,
			cause,
		});

	/** One exchange with a deadline; the caller's abort passes through as itself (cancellation). */
	async function exchange(to: DnsServer, message: Buffer, signal: AbortSignal): Promise<Buffer> {
		const deadline = AbortSignal.timeout(config.timeout);
		try {
			return await exchangeTcp(to, message, AbortSignal.any([signal, deadline]));
		} catch (e) {
			if (signal.aborted) throw e;
			const why = deadline.aborted
				? `no answer within ${config.timeout} ms`
				: `${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`;
			throw Object.assign(new Error(why), { cause: e, unreachable: true });
		}
	}

	async function update(change: TxtChange, signal: AbortSignal): Promise<void> {
		const what = `RFC 2136 ${change.action} of TXT ${normaliseName(change.name)} in zone ${zone} at ${at}`;
		if (!inZone(change.name, zone)) {
			throw fail(
				what,
				`the name is not inside zone ${zone}`,
				`set ${FIELD}.zone to the zone that holds ${normaliseName(change.name)}`,
				false,
			);
		}
		const signed = signMessage(updateMessage(zone, [change]), key, now());
		let raw: Buffer;
		try {
			raw = await exchange(server, signed.message, signal);
		} catch (e) {
			if (signal.aborted) throw e;
			throw fail(
				what,
				(e as Error).message,
				`check that ${at} is reachable over TCP and serves zone ${zone} (${FIELD}.server, ${FIELD}.timeout)`,
				true,
				e,
			);
		}
		const { rcode } = parseResponse(raw);
		const verdict = verifyResponse(raw, key, signed.mac, now());
		const keyHint = `check ${FIELD}.tsig_key_name ("${key.name}"), ${FIELD}.tsig_algorithm (${key.algorithm}) and the secret in ${config.tsig_secret_file}: they must match the key in the server's configuration`;
		if (verdict.kind === "rejected") {
			const hints: Record<string, string> = {
				BADSIG: keyHint,
				BADKEY: `the server knows no key "${key.name}" with algorithm ${key.algorithm}: ${keyHint}`,
				BADTIME: "this host's clock and the server's differ by more than 300 s: synchronise them (NTP)",
			};
			throw fail(
				what,
				`the server rejected the TSIG signature (${rcode}, ${verdict.error})`,
				hints[verdict.error] ?? keyHint,
				false,
			);
		}
		if (verdict.kind === "forged") {
			throw fail(what, `the answer's TSIG signature is not valid: ${verdict.why}`, keyHint, true);
		}
		if (rcode === "NOERROR" && verdict.kind === "verified") return;
		const hints: Record<string, string> = {
			REFUSED: `allow key "${key.name}" to update TXT records in ${zone} on the server (BIND: update-policy { grant ${key.name} zonesub TXT; };), and check that ${at} is primary for ${zone}`,
			NOTAUTH: `${at} is not authoritative for ${zone}: set ${FIELD}.server to the zone's primary`,
			NOTZONE: `${normaliseName(change.name)} is not in zone ${zone} on the server: check ${FIELD}.zone`,
			SERVFAIL: "the server failed to apply the update: see its log",
			NOERROR: `the server answered without a TSIG signature, so the answer cannot be trusted: ${keyHint}`,
		};
		throw fail(
			what,
			rcode === "NOERROR" ? "the answer is not signed" : `the server answered ${rcode}`,
			hints[rcode] ?? "see the server's log",
			rcode === "SERVFAIL" || rcode === "NOERROR",
		);
	}

	/**
	 * The zone's authoritative servers as `server` lists them (NS), each name's addresses from `server` when it
	 * has them (in-zone names), otherwise from the system resolver; on `server`'s port. `server` itself too.
	 */
	async function nameservers(signal: AbortSignal): Promise<DnsServer[]> {
		const ask = async (name: string, type: "NS" | "A" | "AAAA") =>
			parseResponse(await exchange(server, queryMessage(name, type), signal)).names(name, type);
		const found: DnsServer[] = [server];
		for (const ns of await ask(zone, "NS")) {
			let hosts = [...(await ask(ns, "A")), ...(await ask(ns, "AAAA"))];
			if (hosts.length === 0) hosts = (await lookup(ns, { all: true })).map((a) => a.address);
			for (const host of hosts) {
				if (!found.some((f) => f.host === host && f.port === server.port))
					found.push({ host, port: server.port });
			}
		}
		return found;
	}

	async function checkServers(signal: AbortSignal): Promise<DnsServer[]> {
		if (configuredChecks) return configuredChecks;
		try {
			return await nameservers(signal);
		} catch (e) {
			if (signal.aborted) throw e;
			throw fail(
				`RFC 2136 look-up of the nameservers of ${zone} at ${at}`,
				(e as Error).message,
				`set ${FIELD}.check_servers to the zone's authoritative servers (host:port) to skip the look-up`,
				true,
				e,
			);
		}
	}

	/** Polls every checked server until all answer the value (non-recursive TXT queries). */
	async function waitVisible(name: string, value: string, signal: AbortSignal): Promise<void> {
		const deadline = Date.now() + config.propagation_timeout;
		let pending = await checkServers(signal);
		let lastProblem = "";
		for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
			const seen = await Promise.all(
				pending.map(async (to) => {
					try {
						const answer = parseResponse(await exchange(to, queryMessage(name, "TXT"), signal));
						return answer.txt(name).includes(value);
					} catch (e) {
						if (signal.aborted) throw e;
						lastProblem = `; ${formatDnsServer(to)}: ${(e as Error).message}`;
						return false;
					}
				}),
			);
			pending = pending.filter((_, k) => !seen[k]);
			if (pending.length === 0) return;
			if (Date.now() + delay > deadline) {
				throw fail(
					`RFC 2136 check of TXT ${normaliseName(name)} in zone ${zone}`,
					`the new value is not visible on ${pending.map(formatDnsServer).join(", ")} after ${config.propagation_timeout} ms${lastProblem}`,
					`check that the zone's nameservers receive updates from ${at} (NOTIFY/IXFR), or set ${FIELD}.check_servers, or raise ${FIELD}.propagation_timeout`,
					true,
				);
			}
			await sleep(delay, signal);
		}
	}

	return {
		async run(action, name, value, signal) {
			const change: TxtChange = { action: action === "set" ? "add" : "delete", name, value, ttl: config.ttl };
			await update(change, signal);
			if (action !== "set") return;
			try {
				await waitVisible(name, value, signal);
			} catch (e) {
				// The caller cleans up only what was published: take back the value that never became visible.
				await update({ ...change, action: "delete" }, AbortSignal.timeout(config.timeout)).catch(() => {});
				throw e;
			}
		},
	};
}
