/**
 * A real BIND 9 (`named`, Debian bind9) on a free loopback port, as the current user, with one primary zone
 * (its NS ns1.<zone> is named itself unless told otherwise) that accepts RFC 2136 updates signed with TSIG keys generated per start. Run in the foreground (`-g`) from
 * a temp dir holding named.conf, the zone file and each key's secret file (mode 0600).
 *
 *   const bind = await startBind({ zone: "example.test" });
 *   // ... update bind.address with key bind.keys[0], secret file bind.secretFile("certificatee")
 *   await bind.stop();
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { exchangeTcp, parseDnsServer, parseResponse, queryMessage } from "../../src/sources/acme/dns-wire.js";
import { freePorts } from "./ports.js";
import { startProcess, stopProcess, waitUntil } from "./process.js";

export interface BindKey {
	name: string;
	algorithm: "hmac-sha256" | "hmac-sha384" | "hmac-sha512" | "hmac-sha224" | "hmac-sha1";
	/** false: the key is known to named but may not update the zone (updates are REFUSED). */
	grant?: boolean;
}

export interface BindOptions {
	/** Default "example.test". */
	zone?: string;
	/** Default: one hmac-sha256 key "certificatee" allowed to update TXT records anywhere in the zone. */
	keys?: BindKey[];
	/** Address of the zone's NS (ns1.<zone>), default "127.0.0.1" (named itself). named listens only on
	 * 127.0.0.1 (the only loopback address lo has), so any other address is an NS that answers nothing. */
	nsAddress?: string;
}

export interface BindHandle {
	/** "127.0.0.1:<port>", TCP and UDP. */
	address: string;
	port: number;
	zone: string;
	keys: BindKey[];
	/** A file holding the key's base64 secret, mode 0600. */
	secretFile(keyName: string): string;
	/** The TXT values named serves for `name`, sorted (a plain query over TCP, no TSIG). */
	txt(name: string): Promise<string[]>;
	/** named's output so far. */
	log(): string;
	/** Stops named (SIGTERM, then SIGKILL) and removes the temp dir. Idempotent. */
	stop(): Promise<void>;
}

function connects(port: number): Promise<boolean> {
	return new Promise((resolve) => {
		const socket = net.connect({ host: "127.0.0.1", port }, () => {
			socket.destroy();
			resolve(true);
		});
		socket.once("error", () => resolve(false));
	});
}

/** Starts named; a start that loses its port to another process is retried with a new one. */
export async function startBind(options: BindOptions = {}): Promise<BindHandle> {
	for (let attempt = 1; ; attempt++) {
		try {
			return await startBindOnce(options);
		} catch (e) {
			if (attempt >= 3 || !/address in use/i.test(String(e))) throw e;
		}
	}
}

async function startBindOnce(options: BindOptions): Promise<BindHandle> {
	const zone = options.zone ?? "example.test";
	const nsAddress = options.nsAddress ?? "127.0.0.1";
	const keys = options.keys ?? [{ name: "certificatee", algorithm: "hmac-sha256" }];
	const dir = await mkdtemp(path.join(tmpdir(), "certificatee-bind-"));
	const [port] = (await freePorts(1, { udp: true })) as [number];
	const secrets = new Map(keys.map((k) => [k.name, randomBytes(32).toString("base64")]));
	const grants = keys.filter((k) => k.grant !== false).map((k) => `grant ${k.name} zonesub TXT;`);
	const conf = `
options {
	directory "${dir}";
	pid-file "${dir}/named.pid";
	session-keyfile "${dir}/session.key";
	managed-keys-directory "${dir}";
	listen-on port ${port} { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	allow-query { any; };
};
controls { };
${keys.map((k) => `key "${k.name}" { algorithm ${k.algorithm}; secret "${secrets.get(k.name)}"; };`).join("\n")}
zone "${zone}" {
	type primary;
	file "${dir}/${zone}.zone";
	${grants.length > 0 ? `update-policy { ${grants.join(" ")} };` : "allow-update { none; };"}
};
`;
	const zoneFile = `$TTL 60
@	IN SOA ns1.${zone}. hostmaster.${zone}. 1 3600 600 86400 60
@	IN NS ns1.${zone}.
ns1	IN A ${nsAddress}
`;
	await writeFile(path.join(dir, "named.conf"), conf);
	await writeFile(path.join(dir, `${zone}.zone`), zoneFile);
	for (const [name, secret] of secrets) {
		const file = path.join(dir, `${name}.secret`);
		await writeFile(file, `${secret}\n`, { mode: 0o600 });
		await chmod(file, 0o600);
	}

	const named = startProcess("/usr/sbin/named", ["-g", "-c", path.join(dir, "named.conf")], {
		cwd: dir,
		env: process.env,
	});
	let stopped = false;
	const stop = async () => {
		if (stopped) return;
		stopped = true;
		await stopProcess(named);
		await rm(dir, { recursive: true, force: true });
	};
	try {
		// "running" alone on the last line, not "running as: named -g ..." at the start; a lost port shows first.
		await waitUntil("named", named, async () => {
			const out = named.output();
			if (/address in use/i.test(out)) return true;
			return /all zones loaded/.test(out) && / running\s*$/m.test(out) && (await connects(port));
		});
		if (/address in use/i.test(named.output()))
			throw new Error(`named could not listen on ${port}:\n${named.output()}`);
	} catch (e) {
		await stop();
		throw e;
	}

	return {
		address: `127.0.0.1:${port}`,
		port,
		zone,
		keys,
		secretFile(keyName) {
			if (!secrets.has(keyName)) throw new Error(`no key ${keyName}`);
			return path.join(dir, `${keyName}.secret`);
		},
		async txt(name) {
			const answer = await exchangeTcp(
				parseDnsServer(`127.0.0.1:${port}`),
				queryMessage(name, "TXT"),
				AbortSignal.timeout(5000),
			);
			return parseResponse(answer).txt(name).sort();
		},
		log: () => named.output(),
		stop,
	};
}
