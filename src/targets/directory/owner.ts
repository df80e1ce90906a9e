/** "user:group" from config to numeric ids, through /etc/passwd and /etc/group (numbers pass through). */
import { readFile } from "node:fs/promises";
import type { Owner } from "../../atomicdir/index.js";
import { CertificateeError } from "../../errors.js";

export async function resolveOwner(spec: string, target: string): Promise<Owner> {
	const [user = "", group = ""] = spec.split(":");
	return { uid: await lookup(user, "/etc/passwd", target), gid: await lookup(group, "/etc/group", target) };
}

async function lookup(name: string, database: string, target: string): Promise<number> {
	if (/^\d+$/.test(name)) return Number(name);
	const text = await readFile(database, "utf8").catch(() => "");
	for (const line of text.split("\n")) {
		const [entry, , id] = line.split(":");
		if (entry === name && id !== undefined && /^\d+$/.test(id)) return Number(id);
	}
	throw new CertificateeError("CONFIG_INVALID", `owner: no ${name} in ${database}`, {
		context: { target, field: "owner" },
		hint: 'use an existing "user:group" or numeric "uid:gid"',
	});
}
