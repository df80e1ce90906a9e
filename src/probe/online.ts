/** `validate --online`'s TLS handshake at a target's probe address, shared by the HAProxy kinds. */
import type { OnlineContext, PendingCheck } from "../base/online.js";
import { probeServed } from "./index.js";

export function probeCheck(name: string, address: string, sni: string, timeoutMs: number): PendingCheck {
	return {
		kind: "probe",
		name,
		address,
		hint: "check the probe address (host:port of a TLS bind) and that HAProxy listens there",
		run: async (signal) => {
			const served = await probeServed({ address, sni, timeoutMs, signal });
			return `TLS handshake for ${sni}: served ${served.names[0] ?? "a certificate"}`;
		},
	};
}

/** The first DNS name a target carries: probes are made by SNI, and an IP as SNI gets the default certificate. */
export function sniFor(context: OnlineContext, only: readonly string[] | undefined): string {
	const certificates = only
		? context.certificates.filter((c) => only.includes(c.name))
		: context.certificates;
	const name = certificates
		.flatMap((c) => c.domains)
		.find((d) => !/^[\d.:[\]]+$/.test(d) && !d.startsWith("*."));
	return name ?? "localhost";
}
