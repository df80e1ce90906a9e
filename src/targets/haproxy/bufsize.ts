/**
 * HAProxy's one size rule for CLI requests, shared by both HAProxy targets. Pure.
 *
 * A request (command line, `<<` payload and the empty line that ends it) of tune.bufsize bytes or more is
 * never answered properly: on 2.6.12 exactly bufsize makes a worker thread spin and a second such request
 * kills HAProxy; larger ones get the connection closed; 3.2.0 aborts the worker (docs/haproxy-runtime-target.md,
 * "Safety rules"). Whoever frames the request (certificatee's socket client, or the Data Plane API for it), the size is
 * checked here before anything is sent.
 */
import { CertificateeError } from "../../errors.js";

/** HAProxy's default tune.bufsize. */
export const DEFAULT_BUFSIZE = 16_384;

/**
 * Bytes of the `set ssl cert` request the Data Plane API sends for one runtime write, framed as client-native
 * frames it: `set ssl cert <name> <<\n<pem ending in \n>\n`, inside `set severity-output number;…\n`, or in
 * master-worker mode `set severity-output number;@1 …;quit\n`. The longer (master-worker) form is counted.
 */
export function dataplaneSetCertSize(name: string, pem: string): number {
	const payload = pem.endsWith("\n") ? pem : `${pem}\n`;
	const command = `set ssl cert ${name} <<\n${payload}\n`;
	return Buffer.byteLength(`set severity-output number;@1 ${command};quit\n`);
}

/** The note on a runtime step refused for its size, on both targets. */
export const PENDING_RELOAD_NOTE =
	"pending a reload: not hot-updatable on this node (request too large for tune.bufsize); the file on disk holds it and HAProxy serves it after its next reload";

export interface PayloadCheck {
	/** Bytes of the whole request as HAProxy would receive it. */
	size: number;
	bufsize: number;
	endpoint: string;
	/** What would have been sent, e.g. "set ssl cert" or "runtime-set". */
	operation: string;
	/** HAProxy's name of the certificate, when there is one. */
	certificate?: string;
}

/** RUNTIME_PAYLOAD_TOO_LARGE when the request must not be sent; undefined when it fits. */
export function payloadTooLarge(check: PayloadCheck): CertificateeError | undefined {
	if (check.size < check.bufsize) return undefined;
	return new CertificateeError(
		"RUNTIME_PAYLOAD_TOO_LARGE",
		`request of ${check.size} bytes refused for ${check.endpoint}: HAProxy's tune.bufsize is ${check.bufsize} and a request that size or larger crashes HAProxy 2.6-3.2`,
		{
			context: {
				endpoint: check.endpoint,
				operation: check.operation,
				...(check.certificate === undefined ? {} : { certificate: check.certificate }),
			},
			hint: "this certificate cannot be hot-updated on this node: its file is written and HAProxy serves it after the next reload; or shorten the chain, or raise tune.bufsize in haproxy.cfg (and the target's bufsize)",
		},
	);
}
