/**
 * Which valid certificates a directory serves. Pure. A certificate is never replaced by an older one: among
 * files covering the same names with the same key type only the one that expires last is served (an RSA and an
 * ECDSA file for the same names are both served), and a file whose certificate expires before the one already served under its name is reported and the served one kept,
 * unless an operator chose that file's certificate as a deliberate replacement (`accepted`).
 */
import { checkBundle, nameSet } from "../../certificates/index.js";
import type { Bundle } from "../../certificates/types.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import type { Previous } from "./memory.js";

export interface LoadedFile {
	name: string;
	/** The file(s) it came from, for reports. */
	subject: string;
	bundle: Bundle;
}

export interface SelectInput {
	loaded: readonly LoadedFile[];
	/** What was served by the previous load (or remembered in the state store), by name. */
	previous: ReadonlyMap<string, Previous>;
	/** Names whose files exist but are invalid this time. */
	invalid: ReadonlySet<string>;
	now: Date;
	origin: (subject: string) => string;
	/**
	 * Deliberate replacements (`certificatee replace`), certificate name -> fingerprint: that file is served even
	 * though it expires before the certificate served, or than another file for the same names.
	 */
	accepted?: ReadonlyMap<string, string>;
}

export interface Skipped {
	subject: string;
	/** The name of the certificate of the file skipped. */
	certificate: string;
	message: string;
}

const names = (b: Bundle) => nameSet([...b.leaf.dnsNames, ...b.leaf.ipAddresses]);
const day = (d: Date) => d.toISOString();

export function selectNewest(input: SelectInput): { served: DesiredCertificate[]; skipped: Skipped[] } {
	const skipped: Skipped[] = [];
	// HAProxy serves an RSA and an ECDSA certificate for the same names side by side (it picks by the client's
	// signature algorithms), so only files of the same names and the same key type compete.
	const byNamesAndKey = new Map<string, LoadedFile>();
	for (const file of input.loaded) {
		const key = `${file.bundle.leaf.keyType} ${names(file.bundle).join(",")}`;
		const other = byNamesAndKey.get(key);
		if (!other) {
			byNamesAndKey.set(key, file);
			continue;
		}
		const { keep, drop, reason } = compete(file, other, input.accepted);
		byNamesAndKey.set(key, keep);
		skipped.push({
			subject: drop.subject,
			certificate: drop.name,
			message: `${drop.subject}: covers the same names with the same key type (${keyLabel(drop.bundle)}) as ${keep.subject}, ${reason}; skipped`,
		});
	}
	const served: DesiredCertificate[] = [];
	for (const file of byNamesAndKey.values()) {
		const before = input.previous.get(file.name);
		const kept =
			before &&
			!isAccepted(file, input.accepted) &&
			before.names.join(",") === names(file.bundle).join(",") &&
			file.bundle.leaf.notAfter.getTime() < before.notAfter.getTime()
				? before.certificate()
				: undefined;
		if (kept && stillValid(kept, input.now)) {
			skipped.push({
				subject: file.subject,
				certificate: file.name,
				message: `${file.subject}: expires ${day(file.bundle.leaf.notAfter)}, before the certificate already served for "${file.name}" (${day(kept.bundle.leaf.notAfter)}); keeping that one`,
			});
			served.push(kept);
			continue;
		}
		served.push({
			name: file.name,
			names: names(file.bundle),
			bundle: file.bundle,
			origin: input.origin(file.subject),
		});
	}
	// An invalid file never replaces the valid certificate served before it.
	for (const name of input.invalid) {
		if (served.some((d) => d.name === name)) continue;
		const before = input.previous.get(name)?.certificate();
		if (before && stillValid(before, input.now)) served.push(before);
	}
	return { served: served.sort((a, b) => a.name.localeCompare(b.name)), skipped };
}

/**
 * Which of two files of the same names and key type is served, and why, in words true of both: the one that
 * expires later; on equal expiry the one issued later; else (the same validity, or the same certificate) the
 * one whose file name sorts first, so every load and every member picks the same file.
 */
function compete(
	a: LoadedFile,
	b: LoadedFile,
	accepted: ReadonlyMap<string, string> | undefined,
): { keep: LoadedFile; drop: LoadedFile; reason: string } {
	if (isAccepted(a, accepted) !== isAccepted(b, accepted)) {
		const [keep, drop] = isAccepted(a, accepted) ? [a, b] : [b, a];
		return {
			keep,
			drop,
			reason: "which an operator chose as a deliberate replacement (certificatee replace)",
		};
	}
	const [la, lb] = [a.bundle.leaf, b.bundle.leaf];
	if (la.notAfter.getTime() !== lb.notAfter.getTime()) {
		const [keep, drop] = la.notAfter.getTime() > lb.notAfter.getTime() ? [a, b] : [b, a];
		return {
			keep,
			drop,
			reason: `which expires later (${day(keep.bundle.leaf.notAfter)} > ${day(drop.bundle.leaf.notAfter)})`,
		};
	}
	if (la.notBefore.getTime() !== lb.notBefore.getTime()) {
		const [keep, drop] = la.notBefore.getTime() > lb.notBefore.getTime() ? [a, b] : [b, a];
		return {
			keep,
			drop,
			reason: `which expires at the same time (${day(la.notAfter)}) and was issued later (${day(keep.bundle.leaf.notBefore)} > ${day(drop.bundle.leaf.notBefore)})`,
		};
	}
	const [keep, drop] = a.subject < b.subject ? [a, b] : [b, a];
	const what =
		la.fingerprint === lb.fingerprint
			? "which holds the same certificate"
			: `which has the same validity (${day(la.notBefore)} to ${day(la.notAfter)})`;
	return { keep, drop, reason: `${what} and whose file name sorts first` };
}

function isAccepted(file: LoadedFile, accepted: ReadonlyMap<string, string> | undefined): boolean {
	return accepted?.get(file.name) === file.bundle.leaf.fingerprint;
}

function keyLabel(b: Bundle): string {
	return b.leaf.keyType === "ec" ? "ECDSA" : b.leaf.keyType.toUpperCase();
}

function stillValid(d: DesiredCertificate, now: Date): boolean {
	return checkBundle(d.bundle, { source: d.origin, now }).length === 0;
}
