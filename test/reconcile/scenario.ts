/** Builders for reconciler scenarios: desired certificates and observed refs as plain data. */
import { combinedPem, parseBundle } from "../../src/certificates/index.js";
import type { DesiredCertificate, RefMeta } from "../../src/reconcile/model.js";
import type { StepView } from "../../src/reconcile/report.js";
import type { DuplicatePolicy } from "../../src/targets/haproxy/engine/classify.js";
import type { ObservedRef } from "../../src/targets/haproxy/engine/model.js";
import {
	createTestCa,
	issueTestLeaf,
	type LeafOptions,
	type TestIssuer,
	type TestLeaf,
} from "../harness/certs.js";

let ca: TestIssuer | undefined;

export async function desiredCert(
	name: string,
	names: string[],
	options: Omit<LeafOptions, "names"> = {},
): Promise<DesiredCertificate> {
	ca ??= await createTestCa("scenario CA");
	const leaf = await issueTestLeaf(ca, { names, ...options });
	return {
		name,
		names,
		bundle: parseBundle({ combined: leaf.combinedPem }, { source: name }),
		origin: "test",
	};
}

export function metaOf(d: DesiredCertificate, extra: Partial<RefMeta> = {}): RefMeta {
	return {
		serial: d.bundle.leaf.serial,
		sha1: d.bundle.leaf.sha1,
		names: [...d.bundle.leaf.dnsNames].sort(),
		notAfter: d.bundle.leaf.notAfter,
		keyType: d.bundle.leaf.keyType,
		status: "Used",
		...extra,
	};
}

export function oldMeta(names: string[], serial = "0BAD"): RefMeta {
	return {
		serial,
		sha1: "00".repeat(20),
		names: [...names].sort(),
		notAfter: new Date(Date.now() + 86_400_000),
		status: "Used",
	};
}

export function ref(
	name: string,
	sides: { storage?: RefMeta; runtime?: RefMeta; crtLists?: string[] },
): ObservedRef {
	return {
		ref: name,
		runtimeName: `/etc/haproxy/ssl/${name}`,
		...(sides.storage ? { storage: sides.storage } : {}),
		...(sides.runtime ? { runtime: sides.runtime } : {}),
		crtLists: sides.crtLists ?? (sides.runtime ? ["/etc/haproxy/ssl"] : []),
	};
}

export const removePolicy: DuplicatePolicy = { legacyDuplicates: "remove", allowNameRemoval: false };

/** A desired certificate made from a test leaf. */
export function desiredFromLeaf(name: string, leaf: TestLeaf, names: string[]): DesiredCertificate {
	return {
		name,
		names,
		bundle: parseBundle({ combined: leaf.combinedPem }, { source: name }),
		origin: "test",
	};
}

/** The leaf desired with another chain than it was issued with ("" : none, the missing-intermediate case). */
export function desiredWithChain(
	name: string,
	leaf: TestLeaf,
	names: string[],
	chain: string,
): DesiredCertificate {
	return {
		name,
		names,
		bundle: parseBundle({ cert: leaf.certPem, chain, key: leaf.keyPem }, { source: name }),
		origin: "test",
	};
}

/** A crt directory holding each desired certificate as `<name>.pem` (the harness's `crtDir` option). */
export function crtDirOf(certs: DesiredCertificate[]): Record<string, string> {
	return Object.fromEntries(certs.map((d) => [`${d.name}.pem`, combinedPem(d.bundle)]));
}

/** One step on a line, for failure messages: op, ref, result, error and note. */
export function describeStep(s: StepView): string {
	return `${s.op} ${s.ref}: ${s.result}${s.error ? ` ${s.error.code} ${s.error.message}` : ""}${s.note ? ` (${s.note})` : ""}`;
}
