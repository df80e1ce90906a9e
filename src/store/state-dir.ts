/**
 * A state directory that exists before certificatee opens it (issue 25, finding 12): certificatee makes its
 * own 0700, but an operator's may be anything. Another account that can write it can plant or replace state
 * (an ACME account key, a certificate, its key): refused. One that can only read it sees names (every file
 * in it is 0600): a warning, since refusing would stop an installation that works.
 */
import { statSync } from "node:fs";
import { CertificateeError } from "../errors.js";

export interface StateDirCheck {
	/** Set when the directory is readable by others: said at start, not refused. */
	warning?: string;
}

export function checkStateDir(dir: string): StateDirCheck {
	let mode: number;
	try {
		const st = statSync(dir);
		if (!st.isDirectory()) return {};
		mode = st.mode & 0o7777;
	} catch {
		return {};
	}
	const octal = (mode & 0o777).toString(8).padStart(4, "0");
	if (mode & 0o022) {
		const who = mode & 0o002 ? "every account" : "its group";
		throw new CertificateeError(
			"STATE_EXPOSED",
			`state_dir ${dir} is writable by ${who} (mode ${octal}): another account could plant or replace certificatee's keys and certificates`,
			{
				context: { file: dir, field: "state_dir" },
				hint: `chmod 700 ${dir} (certificatee creates it 0700 itself when it does not exist)`,
			},
		);
	}
	if (mode & 0o055) {
		return {
			warning: `state_dir ${dir} is readable by other accounts (mode ${octal}): they see which certificates and accounts it keeps (the files are 0600); chmod 700 ${dir}`,
		};
	}
	return {};
}
