/** Many test leaves fast: one CA, one name each ("c00042.bench.test"), made in batches (test/harness/certs). */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseBundle } from "../../src/certificates/index.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import {
	createTestCa,
	generateKeys,
	issueTestLeaf,
	type TestIssuer,
	type TestLeaf,
} from "../../test/harness/certs.js";

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

interface CachedLeaf {
	name: string;
	sni: string;
	serial: string;
	combinedPem: string;
}

/**
 * `count` leaves c00000.. that one run leaves for the next: made once with one shared ECDSA key (only the
 * signatures cost), kept in bench/.cache/ (gitignored) and read back on later runs. For fleets of many
 * HAProxy processes, where HAProxy loading them is the point and making them is not.
 */
export async function cachedCerts(count: number): Promise<PoolCert[]> {
	const dir = join(fileURLToPath(new URL("..", import.meta.url)), ".cache");
	const file = join(dir, `pool-shared-key-${count}.json`);
	let leaves: CachedLeaf[] | undefined;
	try {
		leaves = JSON.parse(await readFile(file, "utf8")) as CachedLeaf[];
	} catch {
		leaves = undefined;
	}
	if (leaves?.length !== count) {
		const issuer = await benchCa();
		const keys = await generateKeys("ec-p256");
		leaves = [];
		for (let start = 0; start < count; start += 100) {
			const batch = await Promise.all(
				Array.from({ length: Math.min(100, count - start) }, async (_, j) => {
					const name = certName(start + j);
					const sni = `${name}.bench.test`;
					const leaf = await issueTestLeaf(issuer, { names: [sni], keys });
					return { name, sni, serial: leaf.serial, combinedPem: leaf.combinedPem };
				}),
			);
			leaves.push(...batch);
		}
		await mkdir(dir, { recursive: true });
		await writeFile(file, JSON.stringify(leaves), { mode: 0o600 });
	}
	return leaves.map((l) => ({
		name: l.name,
		sni: l.sni,
		// The cache keeps the combined PEM; the parts are cut from it for the callers that want them.
		leaf: {
			combinedPem: l.combinedPem,
			serial: l.serial,
			certPem: l.combinedPem.slice(0, l.combinedPem.indexOf("-----END CERTIFICATE-----") + 26),
			chainPem: "",
			keyPem: l.combinedPem.slice(l.combinedPem.indexOf("-----BEGIN PRIVATE KEY-----")),
		},
	}));
}
