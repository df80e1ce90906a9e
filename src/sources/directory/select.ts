/**
 * Which valid certificates a directory serves. Pure. A certificate is never replaced by an older one: among
 * files covering the same names only the one that expires last is served, and a file whose certificate
 * expires before the one already served under its name is reported and the served one kept.
 */
import { checkBundle, nameSet } from "../../certificates/index.js";
import type { Bundle } from "../../certificates/types.js";
import type { DesiredCertificate } from "../../reconcile/model.js";

export interface LoadedFile {
	name: string;
	/** The file(s) it came from, for reports. */
	subject: string;
	bundle: Bundle;
}

export interface SelectInput {
	loaded: readonly LoadedFile[];
	/** What was served by the previous load, by name. */
	previous: ReadonlyMap<string, DesiredCertificate>;
	/** Names whose files exist but are invalid this time. */
	invalid: ReadonlySet<string>;
	now: Date;
	origin: (subject: string) => string;
}

export interface Skipped {
	subject: string;
	message: string;
}

const names = (b: Bundle) => nameSet([...b.leaf.dnsNames, ...b.leaf.ipAddresses]);
const day = (d: Date) => d.toISOString();

export function selectNewest(input: SelectInput): { served: DesiredCertificate[]; skipped: Skipped[] } {
	const skipped: Skipped[] = [];
	const bySans = new Map<string, LoadedFile>();
	for (const file of input.loaded) {
		const key = names(file.bundle).join(",");
		const other = bySans.get(key);
		if (!other) {
			bySans.set(key, file);
			continue;
		}
		const [keep, drop] =
			file.bundle.leaf.notAfter.getTime() > other.bundle.leaf.notAfter.getTime()
				? [file, other]
				: [other, file];
		bySans.set(key, keep);
		skipped.push({
			subject: drop.subject,
			message: `${drop.subject}: covers the same names as ${keep.subject}, which expires later (${day(keep.bundle.leaf.notAfter)} > ${day(drop.bundle.leaf.notAfter)}); skipped`,
		});
	}
	const served: DesiredCertificate[] = [];
	for (const file of bySans.values()) {
		const before = input.previous.get(file.name);
		if (
			before &&
			before.names.join(",") === names(file.bundle).join(",") &&
			file.bundle.leaf.notAfter.getTime() < before.bundle.leaf.notAfter.getTime() &&
			stillValid(before, input.now)
		) {
			skipped.push({
				subject: file.subject,
				message: `${file.subject}: expires ${day(file.bundle.leaf.notAfter)}, before the certificate already served for "${file.name}" (${day(before.bundle.leaf.notAfter)}); keeping that one`,
			});
			served.push(before);
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
		const before = input.previous.get(name);
		if (before && stillValid(before, input.now) && !served.some((d) => d.name === name)) served.push(before);
	}
	return { served: served.sort((a, b) => a.name.localeCompare(b.name)), skipped };
}

function stillValid(d: DesiredCertificate, now: Date): boolean {
	return checkBundle(d.bundle, { source: d.origin, now }).length === 0;
}
