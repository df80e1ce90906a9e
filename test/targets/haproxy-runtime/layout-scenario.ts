/**
 * The renewal scenario every HAProxy 3.x layout test runs (issue 23): renew a certificate where its layout
 * keeps it, three times, with a reload between renewals. Each time the renewal is served before and after the
 * reload, the files HAProxy pairs hold the new leaf and its key, no file appears, a second cycle writes
 * nothing, and the reload-safety invariant (`haproxy -c`, same serial for every name across a reload) holds.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { expect } from "vitest";
import type { BuiltTarget } from "../../../src/targets/registry.js";
import { issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import type { Haproxy } from "../../harness/haproxy.js";
import { assertReloadSafe } from "../../harness/invariant.js";
import { syncOnce as cycle, servedSerial, okWrites as writes } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

/** Does the private key in `keyPem` belong to the first certificate in `certPem`? */
export function keyMatches(certPem: string, keyPem: string): boolean {
	const leaf = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(certPem)?.[0];
	const key = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----/.exec(keyPem)?.[0];
	if (leaf === undefined || key === undefined) return false;
	return new X509Certificate(leaf).checkPrivateKey(createPrivateKey(key));
}

export const holdsKey = (pem: string) => /PRIVATE KEY-----/.test(pem);

export interface PairFiles {
	/** Absolute paths of the certificate file and of the key file HAProxy pairs with it. */
	cert: string;
	key: string;
	/** The directories whose listing must not change (no file created beside them). */
	dirs: string[];
}

async function listings(dirs: readonly string[]): Promise<string[]> {
	const all = await Promise.all(dirs.map(async (d) => (await readdir(d)).map((f) => `${d}/${f}`)));
	return all.flat().sort();
}

/**
 * Renews `name` (SANs `names`) three times through target `t`, reloading between renewals; `first` is what
 * the files hold at start. Returns each cycle's writes.
 */
export async function renewThreeTimes(o: {
	h: Haproxy;
	t: BuiltTarget;
	ca: TestIssuer;
	name: string;
	names: string[];
	files: PairFiles;
	/** The key stays outside the certificate file (a separate key file), or goes inside it. */
	keyInside?: boolean;
}): Promise<string[][]> {
	const before = await listings(o.files.dirs);
	const perCycle: string[][] = [];
	for (let round = 1; round <= 3; round++) {
		const leaf = await issueTestLeaf(o.ca, { names: o.names });
		const want = [desiredFromLeaf(o.name, leaf, o.names)];
		const e = await cycle(o.t, want, { expectOk: true });
		perCycle.push(writes(e));
		expect(
			e.steps.filter((s) => s.result !== "ok"),
			`round ${round}`,
		).toEqual([]);
		for (const sni of o.names)
			expect(await servedSerial(o.h, sni), `round ${round}: ${sni} before the reload`).toBe(leaf.serial);
		const cert = await readFile(o.files.cert, "utf8");
		const key = await readFile(o.files.key, "utf8");
		expect(cert.includes(leaf.certPem.trim()), `round ${round}: ${o.files.cert} holds the renewal`).toBe(
			true,
		);
		expect(holdsKey(cert), `round ${round}: a key inside ${o.files.cert}`).toBe(o.keyInside === true);
		expect(keyMatches(cert, key), `round ${round}: ${o.files.key} matches ${o.files.cert}`).toBe(true);
		expect(await listings(o.files.dirs), `round ${round}: no file created`).toEqual(before);
		const again = await cycle(o.t, want, { expectOk: true });
		expect(writes(again), `round ${round}: the second cycle writes nothing`).toEqual([]);
		await assertReloadSafe(o.h);
		for (const sni of o.names)
			expect(await servedSerial(o.h, sni), `round ${round}: ${sni} after the reload`).toBe(leaf.serial);
	}
	return perCycle;
}
