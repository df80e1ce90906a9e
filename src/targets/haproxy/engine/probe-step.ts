/** What an endpoint serves, name by name: the probe before and after the writes. */
import pLimit from "p-limit";
import { describeError } from "../../../errors.js";
import { handshakeRefused } from "../../../probe/index.js";
import type { DesiredCertificate } from "../../../reconcile/model.js";
import { type EndpointJob, PROBE_CONCURRENCY, type Probed } from "./endpoint-state.js";
import type { EndpointDriver } from "./model.js";

type Probe = NonNullable<EndpointDriver["probe"]>;

/**
 * Probes every DNS name (not wildcards) of every desired certificate, and every IP address without SNI (what a
 * client reaching the IP gets: the bind's default certificate), as a client of its key type, a few at a time.
 */
export async function probeAll(job: EndpointJob): Promise<Probed> {
	const probe = job.driver.probe?.bind(job.driver);
	if (probe === undefined) return [];
	const limit = pLimit(PROBE_CONCURRENCY);
	const names = job.desired.flatMap(({ certificate }) =>
		[
			...certificate.bundle.leaf.dnsNames.filter((sni) => !sni.startsWith("*.")),
			...certificate.bundle.leaf.ipAddresses,
		].map((sni) => ({ sni, certificate })),
	);
	return Promise.all(
		names.map(({ sni, certificate }) => limit(() => probeOne(probe, job.signal, { sni, certificate }))),
	);
}

/** One name: what it serves against what it should, or why it did not answer. */
async function probeOne(
	probe: Probe,
	signal: AbortSignal,
	{ sni, certificate }: { sni: string; certificate: DesiredCertificate },
): Promise<Probed[number]> {
	const expectedSerial = certificate.bundle.leaf.serial;
	try {
		const keyType = certificate.bundle.leaf.keyType;
		const served = await probe(sni, signal, keyType === "rsa" || keyType === "ec" ? keyType : undefined);
		return {
			served,
			view: {
				sni,
				certificate: certificate.name,
				expectedSerial,
				servedSerial: served.serial,
				match: served.serial === expectedSerial,
			},
		};
	} catch (e) {
		return {
			view: {
				sni,
				certificate: certificate.name,
				expectedSerial,
				match: false,
				error: describeError(e),
				...(handshakeRefused(e) ? { noCertificate: true as const } : {}),
			},
		};
	}
}
