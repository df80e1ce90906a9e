/**
 * The reload-safety invariant (issue 11), checked at the end of every HAProxy-target test:
 * after any cycle, `haproxy -c -f <cfg>` passes, and a reload serves, for every SNI name, the same
 * certificate (serial) as before it. A change that lives only in HAProxy's memory, or a file deleted while
 * a config or crt-list file still names it, breaks this.
 *
 *   await assertReloadSafe(h);                       // every DNS name of every certificate HAProxy holds
 *   await assertReloadSafe(h, { names: ["a.test"] }); // plus these
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "vitest";
import { probeServed } from "../../src/probe/index.js";
import { RuntimeClient } from "../../src/targets/haproxy-runtime/socket.js";
import { HAPROXY_BIN, type Haproxy } from "./haproxy.js";

const run = promisify(execFile);

export interface ReloadSafeOptions {
	/** More SNI names to compare (besides every DNS name of every certificate HAProxy holds). */
	names?: readonly string[];
	/** Names not to compare (e.g. one a test deliberately leaves to a reload). */
	except?: readonly string[];
}

/** `haproxy -c` on the instance's configuration: throws with HAProxy's output when it fails. */
export async function assertConfigValid(h: Haproxy): Promise<void> {
	const cfg = join(h.dir, "haproxy.cfg");
	try {
		await run(HAPROXY_BIN, ["-c", "-q", "-f", cfg], { cwd: h.dir });
	} catch (e) {
		const err = e as { stdout?: string; stderr?: string; message: string };
		throw new Error(`haproxy -c -f ${cfg} failed:\n${err.stdout ?? ""}${err.stderr ?? err.message}`);
	}
}

/** Every SNI name HAProxy could be asked for: each certificate's DNS names, a wildcard as one label under it. */
export async function servedNames(h: Haproxy): Promise<string[]> {
	const client = new RuntimeClient({ address: h.adminSocket, name: "invariant" });
	try {
		const { names } = await client.showCerts();
		const details = await Promise.all(names.map((n) => client.showCert(n)));
		const all = new Set<string>();
		for (const d of details) {
			for (const san of d?.sans ?? []) all.add(san.startsWith("*.") ? `reload-probe${san.slice(1)}` : san);
		}
		return [...all].filter((n) => !/^[\d.:]+$/.test(n)).sort();
	} finally {
		await client.close();
	}
}

async function servedSerials(h: Haproxy, names: readonly string[]): Promise<Record<string, string>> {
	const out: Record<string, string> = {};
	for (const sni of names) {
		try {
			out[sni] = (await probeServed({ address: h.address, sni })).serial;
		} catch (e) {
			out[sni] = `probe failed: ${(e as Error).message}`;
		}
	}
	return out;
}

/** Checks the configuration, reloads, and asserts every name serves the same serial as before. */
export async function assertReloadSafe(h: Haproxy, options: ReloadSafeOptions = {}): Promise<void> {
	const except = new Set(options.except ?? []);
	const names = [...new Set([...(await servedNames(h)), ...(options.names ?? [])])]
		.filter((n) => !except.has(n))
		.sort();
	await assertConfigValid(h);
	const before = await servedSerials(h, names);
	await h.reload();
	const after = await servedSerials(h, names);
	expect(after, "after a reload every name serves the certificate it served before").toEqual(before);
}
