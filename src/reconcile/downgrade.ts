/**
 * Never downgrade, pure: a certificate that is live on a ref and expires later than the one about to be
 * pushed is kept. Several writers can reach one ref (cluster members, a member that lags behind the store, an
 * operator); whichever holds the newer certificate wins, whatever the order of their pushes. Used by the plan
 * of both HAProxy kinds (classify.ts, per side of a ref) and by the directory target (the set's file on disk).
 */

/** What a side shows of its live certificate (RefMeta has these fields). */
export interface LiveCertificate {
	serial?: string;
	notAfter?: Date;
}

/** The certificate about to be pushed (a CertificateInfo has these fields). */
export interface NextCertificate {
	serial: string;
	notAfter: Date;
}

/**
 * Why pushing `next` over the live certificates would be a downgrade: one of them expires strictly later
 * (so it is another certificate). Undefined when the push may go ahead: nothing live, an unknown expiry, the
 * same expiry (the same certificate, or a tie), or every live one expires earlier.
 */
export function downgradeRefusal(
	live: ReadonlyArray<LiveCertificate | undefined>,
	next: NextCertificate,
): string | undefined {
	const newer = live
		.filter((l): l is LiveCertificate & { notAfter: Date } => l?.notAfter !== undefined)
		.filter((l) => l.notAfter.getTime() > next.notAfter.getTime())
		.sort((a, b) => b.notAfter.getTime() - a.notAfter.getTime())[0];
	if (newer === undefined) return undefined;
	const serial = newer.serial === undefined ? "" : `serial ${newer.serial}, `;
	return `the live certificate (${serial}expires ${newer.notAfter.toISOString()}) expires after the one to push (serial ${next.serial}, expires ${next.notAfter.toISOString()}): never downgraded (a newer certificate was pushed by another writer, or this one's desired set is behind)`;
}
