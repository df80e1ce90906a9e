/**
 * `validate --online` for a haproxy-dataplane target: each endpoint's API (auth, `/v3/info`, the storage listing,
 * the crt-store loads HAProxy's own ACME manages) and probe.
 */
import { dirname } from "node:path";
import { type OnlineContext, type PendingCheck, safeUrl } from "../../base/online.js";
import { CertificateeError } from "../../errors.js";
import { probeCheck, sniFor } from "../../probe/online.js";
import { type AcmeManaged, acmeOverlapWarnings } from "../haproxy/acme-overlap.js";
import { createDataplaneClient, type DataplaneClient } from "./client.js";
import { loadRuntimeName, unquote } from "./crt-stores.js";
import type { DataplaneTargetConfig } from "./schema.js";

type Certificates = OnlineContext["certificates"];

export function dataplaneOnlineChecks(t: DataplaneTargetConfig, context: OnlineContext): PendingCheck[] {
	const only = t.certificates;
	const certificates = only
		? context.certificates.filter((c) => only.includes(c.name))
		: context.certificates;
	return t.endpoints.flatMap((e) => [
		dataplane(t, e, certificates),
		...(e.probe
			? [probeCheck(`${t.name}/${e.name}`, e.probe, sniFor(context, t.certificates), e.timeout)]
			: []),
	]);
}

function dataplane(
	target: DataplaneTargetConfig,
	endpoint: DataplaneTargetConfig["endpoints"][number],
	certificates: Certificates,
): PendingCheck {
	const name = `${target.name}/${endpoint.name}`;
	return {
		kind: "dataplane-api",
		name,
		address: safeUrl(endpoint.url),
		hint: "check url, that the Data Plane API runs and is reachable from this host, and ca_file for HTTPS",
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
				const detail = `Data Plane API ${version}, ${files.length} file${files.length === 1 ? "" : "s"} in storage`;
				const warnings = await acmeOverlaps(client, certificates, signal);
				return warnings.length > 0 ? { detail, warnings } : detail;
			} finally {
				await client.close();
			}
		},
	};
}

/**
 * Configured certificates whose names a crt-store load of HAProxy's own ACME client covers (its `acme` and
 * `domains` arguments, as the API's crt_loads show them, 3.2+): two ACME clients for one certificate.
 * certificatee never writes such a certificate (the same warning as the haproxy-runtime target's).
 */
async function acmeOverlaps(
	client: DataplaneClient,
	certificates: Certificates,
	signal: AbortSignal,
): Promise<string[]> {
	const managed: AcmeManaged[] = [];
	// An unnamed store's loads have no URL.
	for (const store of (await client.crtStores.stores(signal)).filter((s) => s.name !== "")) {
		for (const load of await client.crtStores.loads(store.name, signal)) {
			if (load.acme === undefined || load.acme === "") continue;
			// config-parser splits `domains "a,b"` at commas with the quotes kept: join, unquote, split again.
			const names = unquote((load.domains ?? []).join(","))
				.split(",")
				.map((d) => d.trim());
			managed.push({ runtimeName: loadRuntimeName(store.name, load), section: unquote(load.acme), names });
		}
	}
	return acmeOverlapWarnings(managed, certificates);
}
