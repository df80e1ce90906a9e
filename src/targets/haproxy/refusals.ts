/**
 * HAProxy refusals a caller acts on, recognised in HAProxy's own text: the runtime socket answers with it,
 * the Data Plane API passes it on in a 500's message. Pure.
 */

/**
 * `del ssl cert` refused because a crt-list, crt directory or `crt` line still uses the certificate:
 * "Can't remove the certificate: certificate 'certs/a.pem' in use, can't be deleted!".
 */
export function saysInUse(answer: string): boolean {
	return /\bin use\b/i.test(answer);
}
