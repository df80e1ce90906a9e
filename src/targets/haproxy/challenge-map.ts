/**
 * HTTP-01 answers held in an HAProxy map: one node (an HAProxy process) whose runtime map certificatee fills
 * with `<token> <key authorization>` while a challenge is pending. haproxy.cfg answers from it with the rule in
 * README "Challenges across a fleet". Entries live only in HAProxy's memory: the file on disk stays empty.
 */
import { CertificateeError } from "../../errors.js";

export interface ChallengeMapNode {
	/** "<target>" (haproxy-runtime) or "<target>/<endpoint>" (haproxy-dataplane). */
	readonly name: string;
	/** host:port where this node serves plain HTTP (port 80 in production): the check GET goes there. */
	readonly httpAddress: string;
	/** Makes `token` answer `keyAuthorization`, replacing any entry of that key. */
	set(token: string, keyAuthorization: string, signal: AbortSignal): Promise<void>;
	/** Removes the entry of `token`; no error when there is none. */
	remove(token: string, signal: AbortSignal): Promise<void>;
	/** Removes every entry: the map is certificatee's own, so anything in it is a stale token. */
	clear(signal: AbortSignal): Promise<void>;
	close(): Promise<void>;
}

/** ACME tokens and key authorizations are base64url (RFC 8555 §8.1, §8.3) joined by a dot. */
const MAP_WORD = /^[A-Za-z0-9_.-]+$/;

/** Refuses a key or value that would split an HAProxy CLI command (space, `;`, newline). */
export function checkMapWord(node: string, what: string, word: string): string {
	if (MAP_WORD.test(word)) return word;
	throw new CertificateeError(
		"ISSUE_FAILED",
		`${node}: refusing to put a ${what} with unsafe characters in the map`,
		{
			context: { endpoint: node, operation: "haproxy-map set" },
			hint: "ACME tokens are base64url; the CA sent something else",
		},
	);
}
