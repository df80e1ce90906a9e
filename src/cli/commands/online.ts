/**
 * `validate --online`: every address in the configuration contacted once, each reported ok or with its
 * error. One check per runtime socket (`show info`), Data Plane API endpoint (auth and `/v3/info`, then the
 * storage listing), probe address (a TLS handshake) and ACME directory (GET). A failure is a value; the
 * checks run concurrently and one never stops another.
 */
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { Agent, request } from "undici";
import type { Config } from "../../config/schema.js";
import { CertificateeError, describeError, type ErrorCode, isCertificateeError } from "../../errors.js";
import { probeServed } from "../../probe/index.js";
import { directoryProfiles, unknownProfile } from "../../sources/acme/profiles.js";
import { createDataplaneClient } from "../../targets/haproxy-dataplane/client.js";
import type { DataplaneTargetConfig } from "../../targets/haproxy-dataplane/schema.js";
import { RuntimeClient } from "../../targets/haproxy-runtime/socket.js";

export type CheckKind = "runtime-socket" | "dataplane-api" | "probe" | "acme-directory";

export interface OnlineCheck {
	kind: CheckKind;
	/** `target`, `target/endpoint` or the source's name. */
	name: string;
	/** What was contacted (a URL without credentials, a socket path, host:port). */
	address: string;
	ok: boolean;
	/** ok: what answered (version, pid, file count). */
	detail?: string;
	/** ok, but worth an operator's look: a configured certificate HAProxy's own ACME manages too. */
	warnings?: string[];
	error?: { code: ErrorCode; message: string; hint: string };
}

interface Pending {
	kind: CheckKind;
	name: string;
	address: string;
	run(signal: AbortSignal): Promise<string | { detail: string; warnings: string[] }>;
}

/** A URL as printed: never with the user and password someone put in it. */
function safeUrl(url: string): string {
	try {
		const u = new URL(url);
		u.username = "";
		u.password = "";
		return u.toString();
	} catch {
		return "(invalid URL)";
	}
}

/**
 * Configured certificates whose names a certificate of HAProxy's own ACME client covers (`acme status`,
 * 3.2+): two ACME clients for one certificate. certificatee never writes such a certificate.
 */
async function acmeOverlaps(
	client: RuntimeClient,
	certificates: ReadonlyArray<{ name: string; domains: readonly string[] }>,
): Promise<string[]> {
	const managed = await client.acmeStatus();
	const warnings: string[] = [];
	for (const [store, section] of managed) {
		const sans = (await client.showCert(store))?.sans ?? [];
		for (const c of certificates) {
			const shared = c.domains.filter((d) => sans.includes(d.toLowerCase()));
			if (shared.length === 0) continue;
			warnings.push(
				`certificate "${c.name}" (${shared.join(", ")}) is also managed by HAProxy's own ACME client: ${store}, acme section "${section}"; certificatee never writes it (MANAGED_BY_HAPROXY_ACME). Keep one ACME client per certificate`,
			);
		}
	}
	return warnings;
}

function runtimeSocket(
	name: string,
	address: string,
	master: boolean,
	timeoutMs: number,
	certificates: ReadonlyArray<{ name: string; domains: readonly string[] }> = [],
): Pending {
	return {
		kind: "runtime-socket",
		name,
		address,
		run: async () => {
			const client = new RuntimeClient({ address, master, name, timeoutMs });
			try {
				const info = await client.showInfo();
				if (info.Version === undefined) {
					throw new CertificateeError(
						"ENDPOINT_UNAVAILABLE",
						`${address} answered show info without a Version`,
						{
							context: { endpoint: name },
							hint: "is this HAProxy's stats socket (level admin) or, with master_socket: true, its master CLI?",
						},
					);
				}
				const detail = `HAProxy ${info.Version}, pid ${info.Pid ?? "?"}`;
				const warnings = await acmeOverlaps(client, certificates);
				return warnings.length > 0 ? { detail, warnings } : detail;
			} finally {
				await client.close();
			}
		},
	};
}

function dataplane(
	target: DataplaneTargetConfig,
	endpoint: DataplaneTargetConfig["endpoints"][number],
): Pending {
	const name = `${target.name}/${endpoint.name}`;
	return {
		kind: "dataplane-api",
		name,
		address: safeUrl(endpoint.url),
		run: async (signal) => {
			// One attempt: validate reports what answers now, it does not ride out a blip.
			const client = createDataplaneClient(endpoint, { retry: { attempts: 1, baseMs: 0, maxMs: 0 } });
			try {
				const info = await client.info(signal);
				const version = info.api?.version ?? "";
				if (!/^v?3\./.test(version)) {
					throw new CertificateeError(
						"ENDPOINT_UNAVAILABLE",
						`endpoint ${name}: the Data Plane API reports version "${version || "none"}", certificatee needs v3`,
						{
							context: { endpoint: name },
							hint: "upgrade the Data Plane API to v3, or point url at a v3 server",
						},
					);
				}
				const files = await client.storage.list(signal);
				const elsewhere = files.find(
					(f) => f.file !== undefined && dirname(f.file) !== target.storage_dir.replace(/\/+$/, ""),
				);
				if (elsewhere?.file !== undefined) {
					throw new CertificateeError(
						"CONFIG_INVALID",
						`endpoint ${name}: the API stores certificates in ${dirname(elsewhere.file)}, but storage_dir is ${target.storage_dir}`,
						{
							context: { endpoint: name, field: "storage_dir" },
							hint: `set storage_dir: ${dirname(elsewhere.file)} (the API's ssl-certs-dir, as haproxy.cfg spells it)`,
						},
					);
				}
				return `Data Plane API ${version}, ${files.length} file${files.length === 1 ? "" : "s"} in storage`;
			} finally {
				await client.close();
			}
		},
	};
}

function probe(name: string, address: string, sni: string, timeoutMs: number): Pending {
	return {
		kind: "probe",
		name,
		address,
		run: async (signal) => {
			const served = await probeServed({ address, sni, timeoutMs, signal });
			return `TLS handshake for ${sni}: served ${served.names[0] ?? "a certificate"}`;
		},
	};
}

/** A profile the configuration orders from an ACME issuer, and where it is set. */
interface WantedProfile {
	profile: string;
	certificate?: string;
	field: string;
}

/** Every profile ordered from `source`: its own default, and each certificate's own. */
function wantedProfiles(config: Config, source: string): WantedProfile[] {
	const own = config.sources.find((s) => s.name === source && s.type === "acme");
	const fallback = own?.type === "acme" ? own.profile : undefined;
	const wanted: WantedProfile[] = fallback ? [{ profile: fallback, field: `sources.${source}.profile` }] : [];
	config.certificates.forEach((c, i) => {
		if (c.profile && c.issuers.includes(source))
			wanted.push({ profile: c.profile, certificate: c.name, field: `certificates[${i}].profile` });
	});
	return wanted;
}

function acmeDirectory(
	name: string,
	url: string,
	caFile: string | undefined,
	timeoutMs: number,
	profiles: WantedProfile[] = [],
): Pending {
	return {
		kind: "acme-directory",
		name,
		address: safeUrl(url),
		run: async (signal) => {
			const ca = caFile === undefined ? undefined : readFileSync(caFile, "utf8");
			const dispatcher = new Agent({ connect: ca ? { ca } : {}, connectTimeout: timeoutMs });
			try {
				const res = await request(url, {
					dispatcher,
					signal,
					headersTimeout: timeoutMs,
					bodyTimeout: timeoutMs,
				});
				const body = await res.body.text();
				let directory: { newNonce?: unknown; newAccount?: unknown; newOrder?: unknown } | undefined;
				try {
					directory = JSON.parse(body) as typeof directory;
				} catch {
					directory = undefined;
				}
				if (res.statusCode !== 200 || typeof directory?.newOrder !== "string") {
					throw new CertificateeError(
						"ENDPOINT_UNAVAILABLE",
						`source ${name}: ${safeUrl(url)} answered ${res.statusCode} without an ACME directory (newOrder)`,
						{
							context: { endpoint: name, field: "directory_url" },
							hint: "directory_url must be the CA's ACME directory URL",
						},
					);
				}
				// draft-ietf-acme-profiles: the profiles it offers, and each configured one checked against them.
				const offered = directoryProfiles(directory);
				for (const w of profiles) {
					const refused = unknownProfile(w.profile, offered, {
						issuer: name,
						...(w.certificate ? { certificate: w.certificate } : {}),
						endpoint: safeUrl(url),
						field: w.field,
					});
					if (refused) throw refused;
				}
				const listed = offered ? Object.keys(offered) : [];
				return `ACME directory (newAccount, newOrder${typeof directory.newNonce === "string" ? ", newNonce" : ""}); profiles: ${listed.length > 0 ? listed.join(", ") : "none listed"}`;
			} finally {
				await dispatcher.close();
			}
		},
	};
}

/** The first DNS name a target carries: probes are made by SNI, and an IP as SNI gets the default certificate. */
function sniFor(config: Config, only: string[] | undefined): string {
	const certificates = only ? config.certificates.filter((c) => only.includes(c.name)) : config.certificates;
	const name = certificates
		.flatMap((c) => c.domains)
		.find((d) => !/^[\d.:[\]]+$/.test(d) && !d.startsWith("*."));
	return name ?? "localhost";
}

export function onlineChecks(config: Config): Pending[] {
	const checks: Pending[] = [];
	for (const t of config.targets) {
		if (t.type === "haproxy-runtime") {
			const only = t.certificates;
			const certificates = only
				? config.certificates.filter((c) => only.includes(c.name))
				: config.certificates;
			checks.push(runtimeSocket(t.name, t.socket, t.master_socket, t.timeout, certificates));
			if (t.probe) checks.push(probe(t.name, t.probe, sniFor(config, t.certificates), t.timeout));
		} else if (t.type === "haproxy-dataplane") {
			for (const e of t.endpoints) {
				checks.push(dataplane(t, e));
				if (e.probe)
					checks.push(probe(`${t.name}/${e.name}`, e.probe, sniFor(config, t.certificates), e.timeout));
			}
		}
	}
	for (const s of config.sources) {
		if (s.type === "acme")
			checks.push(acmeDirectory(s.name, s.directory_url, s.ca_file, 10_000, wantedProfiles(config, s.name)));
	}
	return checks;
}

const DEFAULT_HINT: Record<CheckKind, string> = {
	"runtime-socket": "check that HAProxy runs and that socket is its stats socket (level admin)",
	"dataplane-api":
		"check url, that the Data Plane API runs and is reachable from this host, and ca_file for HTTPS",
	probe: "check the probe address (host:port of a TLS bind) and that HAProxy listens there",
	"acme-directory":
		"check directory_url, that the ACME server is reachable from this host, and ca_file for a private CA",
};

/** Runs every check at once, each bounded by `timeoutMs`. */
export async function runOnlineChecks(config: Config, timeoutMs = 30_000): Promise<OnlineCheck[]> {
	return Promise.all(
		onlineChecks(config).map(async ({ run, ...check }): Promise<OnlineCheck> => {
			try {
				const answer = await run(AbortSignal.timeout(timeoutMs));
				return typeof answer === "string"
					? { ...check, ok: true, detail: answer }
					: { ...check, ok: true, detail: answer.detail, warnings: answer.warnings };
			} catch (e) {
				const error: OnlineCheck["error"] = isCertificateeError(e)
					? { code: e.code, message: e.message, hint: e.hint ?? DEFAULT_HINT[check.kind] }
					: { code: "ENDPOINT_UNAVAILABLE", message: describeError(e), hint: DEFAULT_HINT[check.kind] };
				return { ...check, ok: false, error };
			}
		}),
	);
}
