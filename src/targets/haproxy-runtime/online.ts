/**
 * `validate --online` for a haproxy-runtime target: its socket (`show info`, `show ssl crt-list` at `level admin`,
 * HAProxy's own ACME), its probe address.
 */
import type { OnlineContext, PendingCheck } from "../../base/online.js";
import { CertificateeError } from "../../errors.js";
import { probeCheck, sniFor } from "../../probe/online.js";
import { type AcmeManaged, acmeOverlapWarnings } from "../haproxy/acme-overlap.js";
import type { RuntimeTargetConfig } from "./schema.js";
import { RuntimeClient } from "./socket.js";

export function runtimeOnlineChecks(t: RuntimeTargetConfig, context: OnlineContext): PendingCheck[] {
	const only = t.certificates;
	const certificates = only
		? context.certificates.filter((c) => only.includes(c.name))
		: context.certificates;
	return [
		runtimeSocket(t.name, t.socket, t.master_socket, t.timeout, certificates),
		...(t.probe ? [probeCheck(t.name, t.probe, sniFor(context, t.certificates), t.timeout)] : []),
	];
}

/**
 * Configured certificates whose names a certificate of HAProxy's own ACME client covers (`acme status`,
 * 3.2+): two ACME clients for one certificate. certificatee never writes such a certificate.
 */
async function acmeOverlaps(
	client: RuntimeClient,
	certificates: ReadonlyArray<{ name: string; domains: readonly string[] }>,
): Promise<string[]> {
	const managed: AcmeManaged[] = [];
	for (const [store, section] of await client.acmeStatus()) {
		managed.push({ runtimeName: store, section, names: (await client.showCert(store))?.sans ?? [] });
	}
	return acmeOverlapWarnings(managed, certificates);
}

function runtimeSocket(
	name: string,
	address: string,
	master: boolean,
	timeoutMs: number,
	certificates: ReadonlyArray<{ name: string; domains: readonly string[] }> = [],
): PendingCheck {
	return {
		kind: "runtime-socket",
		name,
		address,
		hint: "check that HAProxy runs and that socket is its stats socket (level admin)",
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
				// The first command of every observation: a socket below `level admin` answers it "Permission
				// denied" (show info answers at any level), so that is found here, not at the first cycle.
				await client.showCrtLists();
				const detail = `HAProxy ${info.Version}, pid ${info.Pid ?? "?"}`;
				const warnings = await acmeOverlaps(client, certificates);
				return warnings.length > 0 ? { detail, warnings } : detail;
			} finally {
				await client.close();
			}
		},
	};
}
