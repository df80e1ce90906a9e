/**
 * on_change commands that have not succeeded since their files changed, remembered on disk (one empty file per
 * certificate under <state_dir>/hooks/<target>/) so a failed hook is retried every cycle, across restarts,
 * until it succeeds. Marked before the command runs, cleared after it succeeds: a crash in between retries it.
 */
import { mkdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CertificateeError } from "../../errors.js";

export interface PendingHooks {
	has(certificate: string): Promise<boolean>;
	mark(certificate: string): Promise<void>;
	clear(certificate: string): Promise<void>;
}

/** A name used as one path segment under state_dir: never `/`, `..` or NUL (a target named ../../x escaped it). */
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function segment(name: string, what: string): string {
	if (PLAIN.test(name)) return name;
	throw new CertificateeError(
		"CONFIG_INVALID",
		`${what} name ${JSON.stringify(name)} cannot name a file under the state directory`,
		{
			context: { field: `${what}.name` },
			hint: "use letters, digits, '.', '_' and '-' only",
		},
	);
}

export function pendingHooksIn(stateDir: string, target: string): PendingHooks {
	const dir = join(stateDir, "hooks", segment(target, "target"));
	const file = (certificate: string) => join(dir, segment(certificate, "certificate"));
	return {
		has: (certificate) =>
			stat(file(certificate)).then(
				() => true,
				() => false,
			),
		async mark(certificate) {
			await mkdir(dir, { recursive: true, mode: 0o700 });
			await writeFile(file(certificate), "", { mode: 0o600 });
		},
		clear: (certificate) => rm(file(certificate), { force: true }),
	};
}

/** Without a state directory (tests, benches): remembered for the life of the process. */
export function pendingHooksInMemory(): PendingHooks {
	const pending = new Set<string>();
	return {
		has: async (c) => pending.has(c),
		mark: async (c) => void pending.add(c),
		clear: async (c) => void pending.delete(c),
	};
}
