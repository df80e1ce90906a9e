/**
 * HTTP-01 answers in the map of a HAProxy reached through its runtime socket: `add map` / `del map` /
 * `clear map`, all in memory. The map file itself is only made to exist (empty, 0644) so haproxy.cfg's rule
 * loads after any reload; no token is ever written to it.
 */
import { chmod, writeFile } from "node:fs/promises";
import { CertificateeError } from "../../errors.js";
import { type ChallengeMapNode, checkMapWord } from "../haproxy/challenge-map.js";
import type { RuntimeTargetConfig } from "./schema.js";
import { RuntimeClient } from "./socket.js";

const UNKNOWN_MAP = /^Unknown map identifier/;
const KEY_NOT_FOUND = /^Key not found/;

/** Creates the map file empty, mode 0644, when it is missing; an existing file is left as it is. */
export async function ensureMapFile(map: string, node: string): Promise<void> {
	try {
		await writeFile(map, "", { flag: "wx", mode: 0o644 });
		await chmod(map, 0o644); // the umask may have narrowed it; HAProxy reads it after dropping privileges
	} catch (e) {
		const code = (e as NodeJS.ErrnoException).code;
		if (code === "EEXIST") return;
		throw new CertificateeError(
			"ISSUE_FAILED",
			`${node}: cannot create the map file ${map}: ${code ?? String(e)}`,
			{
				context: { endpoint: node, file: map, field: "http01.map" },
				hint: "create it once by hand (an empty file, mode 0644) in a directory HAProxy reads",
				cause: e,
			},
		);
	}
}

export function createRuntimeChallengeMap(
	config: RuntimeTargetConfig,
	map: string,
	client?: RuntimeClient,
): ChallengeMapNode {
	const node = config.name;
	if (config.http_address === undefined) {
		throw new CertificateeError("CONFIG_INVALID", `target ${node} has no http_address`, {
			context: { target: node, field: "http_address" },
			hint: "set http_address to the host:port where this HAProxy serves port 80",
		});
	}
	const socket =
		client ??
		new RuntimeClient({
			address: config.socket,
			master: config.master_socket,
			name: node,
			timeoutMs: config.timeout,
		});

	/** Runs one map command; anything but an empty answer (or an accepted one) is a failure naming the node. */
	async function command(line: string, operation: string, accept?: RegExp): Promise<void> {
		const answer = (await socket.run(line)).trim();
		if (answer === "" || accept?.test(answer)) return;
		throw new CertificateeError(
			"RUNTIME_COMMAND_FAILED",
			`${operation} ${map} on ${node} failed: ${answer}`,
			{
				context: { endpoint: node, target: node, operation, file: map },
				hint: UNKNOWN_MAP.test(answer)
					? `HAProxy on ${node} has no map ${map}: add the rule of README "Challenges across a fleet" to haproxy.cfg (spelling the path exactly as http01.map) and reload it`
					: undefined,
			},
		);
	}

	return {
		name: node,
		httpAddress: config.http_address,
		async set(token, keyAuthorization) {
			const key = checkMapWord(node, "token", token);
			const value = checkMapWord(node, "key authorization", keyAuthorization);
			// `add map` appends a second entry for an existing key: remove any first.
			await command(`del map ${map} ${key}`, "del map", KEY_NOT_FOUND);
			await command(`add map ${map} ${key} ${value}`, "add map");
		},
		async remove(token) {
			await command(`del map ${map} ${checkMapWord(node, "token", token)}`, "del map", KEY_NOT_FOUND);
		},
		async clear() {
			await ensureMapFile(map, node);
			await command(`clear map ${map}`, "clear map");
		},
		close: () => socket.close(),
	};
}
