/**
 * What a load served, kept as the next load's memory, and the certificates held: served in place of what their
 * files hold now (an invalid or older file), whose problems say so in their hint.
 */
import { CertificateeError } from "../../errors.js";
import type { DesiredCertificate, SourceProblem } from "../../reconcile/model.js";
import { type Previous, previousOf } from "./memory.js";
import type { LoadedFile, Skipped } from "./select.js";

/** What this load served, as the next load's memory; each keeps the time it was first served under its name. */
export function servedNow(
	before: ReadonlyMap<string, Previous>,
	served: readonly DesiredCertificate[],
	now: Date,
	/** What precedes the file in a certificate's origin. */
	prefix: string,
): Map<string, Previous> {
	const out = new Map<string, Previous>();
	for (const d of served) {
		const was = before.get(d.name);
		const since = was?.fingerprint === d.bundle.leaf.fingerprint ? was.since : now;
		const file = d.origin.startsWith(prefix) ? d.origin.slice(prefix.length) : d.origin;
		out.set(d.name, previousOf(d, file, since));
	}
	return out;
}

/** The certificates served in place of what their files hold now (an invalid or older file). */
export function heldNow(
	served: ReadonlyMap<string, Previous>,
	loaded: readonly LoadedFile[],
): Map<string, Previous> {
	const fromFile = new Map(loaded.map((f) => [f.name, f.bundle.leaf.fingerprint]));
	return new Map([...served].filter(([name, p]) => fromFile.get(name) !== p.fingerprint));
}

/**
 * A problem of a file whose certificate is held (the last valid one stays served): its hint says so, and that
 * removing the file removes the certificate.
 */
export function withHeldHint(p: SourceProblem, held: ReadonlyMap<string, Previous>): SourceProblem {
	const h = p.certificate === undefined ? undefined : held.get(p.certificate);
	const leaf = h?.certificate()?.bundle.leaf;
	if (h === undefined || leaf === undefined) return p;
	const kept = `the last valid certificate of "${p.certificate}" (serial ${leaf.serial}, expires ${leaf.notAfter.toISOString()}, from ${h.file}) stays served until then; removing the file removes the certificate`;
	const hint =
		p.error.code === "SOURCE_OLDER"
			? `to serve this file anyway (a key compromise, a CA change), run certificatee replace ${p.certificate} --reason "…"; ${kept}`
			: `${p.error.hint ? `${p.error.hint}; ` : ""}fix the file: ${kept}`;
	const error = new CertificateeError(p.error.code, p.error.message, {
		context: { ...p.error.context, certificate: p.certificate },
		hint,
		retryable: p.error.retryable,
	});
	return { ...p, error };
}

/** A file not served because an older certificate than the one served: how to serve it anyway. */
export function olderFileProblem(s: Skipped): SourceProblem {
	return {
		subject: s.subject,
		certificate: s.certificate,
		error: new CertificateeError("SOURCE_OLDER", s.message, {
			context: { file: s.subject, certificate: s.certificate },
			hint: `to serve this file anyway (a key compromise, a CA change), run certificatee replace ${s.certificate} --reason "…"; otherwise remove it (the certificate served stays)`,
		}),
	};
}
