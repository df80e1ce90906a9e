/**
 * on_change commands that have not succeeded since their files changed, remembered in the local state store
 * (record `hooks/<target>/<certificate>`, `{ pending }`) so a failed hook is retried every cycle, across
 * restarts, until it succeeds. Marked before the command runs, cleared after it succeeds: a crash in between
 * retries it. Local even in a cluster: a directory target writes this host's files, and this host runs its hook.
 * Before the store, each pending hook was an empty file `<state_dir>/hooks/<target>/<certificate>`: one left
 * by an older version still counts as pending, and is removed when the hook succeeds.
 */
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { CertificateeError, isCertificateeError } from "../../errors.js";
import type { StateStore } from "../../store/types.js";

export interface PendingHooks {
	has(certificate: string): Promise<boolean>;
	mark(certificate: string): Promise<void>;
	clear(certificate: string): Promise<void>;
}

/** A name used as one segment of a state key: never `/`, `..` or NUL (a target named ../../x escaped state_dir). */
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

const isPending = (value: unknown) =>
	typeof value === "object" && value !== null && (value as { pending?: unknown }).pending === true;

/** `store` is the local state store; `legacyStateDir` (its directory) is where older versions left files. */
export function pendingHooksIn(store: StateStore, target: string, legacyStateDir?: string): PendingHooks {
	const prefix = `hooks/${segment(target, "target")}`;
	const key = (certificate: string) => `${prefix}/${segment(certificate, "certificate")}`;
	const legacy = (certificate: string) =>
		legacyStateDir === undefined
			? undefined
			: join(legacyStateDir, "hooks", target, segment(certificate, "certificate"));

	async function set(certificate: string, pending: boolean): Promise<void> {
		// One writer per target in practice (the cycle); a conflict only means another write came first.
		for (let attempt = 0; ; attempt++) {
			const current = await store.get(key(certificate));
			if (isPending(current?.value) === pending && current !== undefined) return;
			if (!pending && current === undefined) return;
			try {
				await store.put(key(certificate), { pending }, current?.version ?? 0);
				return;
			} catch (e) {
				if (attempt >= 2 || !isCertificateeError(e, "STATE_CONFLICT")) throw e;
			}
		}
	}

	return {
		async has(certificate) {
			const current = await store.get(key(certificate));
			if (current !== undefined) return isPending(current.value);
			const old = legacy(certificate);
			return old === undefined
				? false
				: stat(old).then(
						() => true,
						() => false,
					);
		},
		mark: (certificate) => set(certificate, true),
		async clear(certificate) {
			const old = legacy(certificate);
			if (old !== undefined) await rm(old, { force: true });
			await set(certificate, false);
		},
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
