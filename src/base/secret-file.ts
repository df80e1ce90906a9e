/**
 * Secret files (passwords, tokens, the TSIG secret, the cluster key) must be readable by certificatee's user
 * only, as ssh insists for a private key: a group or world bit on a file certificatee owns, or a world bit on
 * any, is refused. A file owned by another account (root) and readable by its group is allowed: that is how
 * a secret is handed to certificatee's group (`root:certificatee 0640`, Kubernetes' fsGroup).
 */
import { statSync } from "node:fs";

/** Why `file` is too open, with the fix; undefined when it is private enough (or cannot be stat'ed). */
export function secretFileExposure(
	file: string,
	field: string,
	ownUid = process.getuid?.(),
): string | undefined {
	let st: { mode: number; uid: number };
	try {
		st = statSync(file);
	} catch {
		return undefined;
	}
	const mode = st.mode & 0o777;
	const own = ownUid === undefined || st.uid === ownUid;
	const open = own ? mode & 0o077 : mode & 0o007;
	if (open === 0) return undefined;
	const who = mode & 0o007 ? "other accounts" : "its group";
	const octal = mode.toString(8).padStart(4, "0");
	return `${field} ${file} is accessible to ${who} (mode ${octal}); a secret file must be private to certificatee's user, as ssh requires of a key: chmod 600 ${file}`;
}
