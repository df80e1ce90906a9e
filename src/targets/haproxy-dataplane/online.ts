/** `validate --online` for a haproxy-dataplane target: each endpoint's API (auth, `/v3/info`, the storage listing) and probe. */
import { dirname } from "node:path";
import { type OnlineContext, type PendingCheck, safeUrl } from "../../base/online.js";
import { CertificateeError } from "../../errors.js";
import { probeCheck, sniFor } from "../../probe/online.js";
import { createDataplaneClient } from "./client.js";
import type { DataplaneTargetConfig } from "./schema.js";

export function dataplaneOnlineChecks(t: DataplaneTargetConfig, context: OnlineContext): PendingCheck[] {
	return t.endpoints.flatMap((e) => [
		dataplane(t, e),
		...(e.probe
			? [probeCheck(`${t.name}/${e.name}`, e.probe, sniFor(context, t.certificates), e.timeout)]
			: []),
	]);
}

function dataplane(
	target: DataplaneTargetConfig,
	endpoint: DataplaneTargetConfig["endpoints"][number],
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
				return `Data Plane API ${version}, ${files.length} file${files.length === 1 ? "" : "s"} in storage`;
			} finally {
				await client.close();
			}
		},
	};
}
