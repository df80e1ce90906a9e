/** The certificate model: parse, normalise, describe and check bundles. Pure apart from node:crypto. */
import type { CertificateeError } from "../errors.js";
import { type BundleInput, parseBundle } from "./bundle.js";
import { type CheckOptions, checkBundle } from "./check.js";
import type { Bundle } from "./types.js";

export {
	type BundleInput,
	bundleNames,
	combinedPem,
	describeCertificate,
	MAX_BUNDLE_BYTES,
	parseBundle,
} from "./bundle.js";
export { type ChainView, chainFingerprints, chainMatches, commonName, keyTypeOf } from "./chain.js";
export { type CheckOptions, checkBundle, checkChangesAfter } from "./check.js";
export {
	droppedNames,
	nameCovers,
	nameSet,
	normaliseName,
	normaliseSerial,
	sameNameSet,
	uncoveredNames,
} from "./names.js";
export { type Bundle, type CertificateInfo, Secret } from "./types.js";

/** Parses and checks; the bundle, or every problem found (a parse error is always alone). */
export function loadBundle(
	input: BundleInput,
	options: CheckOptions,
): { ok: true; bundle: Bundle } | { ok: false; problems: CertificateeError[] } {
	let bundle: Bundle;
	try {
		bundle = parseBundle(input, { source: options.source });
	} catch (e) {
		return { ok: false, problems: [e as CertificateeError] };
	}
	const problems = checkBundle(bundle, options);
	return problems.length === 0 ? { ok: true, bundle } : { ok: false, problems };
}
