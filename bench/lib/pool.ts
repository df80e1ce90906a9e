/** Many test leaves fast: one CA, one name each ("c00042.bench.test"), made in batches (test/harness/certs). */
import { parseBundle } from "../../src/certificates/index.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../../test/harness/certs.js";

export interface PoolCert {
	/** certificatee's certificate name and HAProxy file base: "c00042". */
	name: string;
	sni: string;
	leaf: TestLeaf;
}

let ca: TestIssuer | undefined;
export async function benchCa(): Promise<TestIssuer> {
	ca ??= await createTestCa("certificatee bench CA");
	return ca;
}

export const certName = (i: number) => `c${String(i).padStart(5, "0")}`;

/** `count` leaves c<from>..; each call issues fresh leaves (new keys, new serials). */
export async function makeCerts(count: number, from = 0): Promise<PoolCert[]> {
	const issuer = await benchCa();
	const out: PoolCert[] = [];
	for (let start = from; start < from + count; start += 100) {
		const batch = await Promise.all(
			Array.from({ length: Math.min(100, from + count - start) }, async (_, j) => {
				const name = certName(start + j);
				const sni = `${name}.bench.test`;
				return { name, sni, leaf: await issueTestLeaf(issuer, { names: [sni] }) };
			}),
		);
		out.push(...batch);
	}
	return out;
}

/** HAProxy crt directory contents: "<name>.pem" → combined PEM. */
export function crtDirFiles(certs: readonly PoolCert[]): Record<string, string> {
	return Object.fromEntries(certs.map((c) => [`${c.name}.pem`, c.leaf.combinedPem]));
}

export function desiredOf(certs: readonly PoolCert[]): DesiredCertificate[] {
	return certs.map((c) => ({
		name: c.name,
		names: [c.sni],
		bundle: parseBundle({ combined: c.leaf.combinedPem }, { source: c.name }),
		origin: "bench",
	}));
}
