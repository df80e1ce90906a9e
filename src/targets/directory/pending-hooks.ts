/**
 * on_change commands that have not succeeded since their files changed, remembered on disk (one empty file per
 * certificate under <state_dir>/hooks/<target>/) so a failed hook is retried every cycle, across restarts,
 * until it succeeds. Marked before the command runs, cleared after it succeeds: a crash in between retries it.
 */
import { mkdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface PendingHooks {
	has(certificate: string): Promise<boolean>;
	mark(certificate: string): Promise<void>;
	clear(certificate: string): Promise<void>;
}

export function pendingHooksIn(stateDir: string, target: string): PendingHooks {
	const dir = join(stateDir, "hooks", target);
	const file = (certificate: string) => join(dir, certificate);
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
