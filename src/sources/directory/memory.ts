/**
 * What a directory source serves in place of its files, kept in the state store (`sources/<source>`): when a file
 * turns invalid (a key that does not match, say) or is replaced by a certificate that expires earlier, the source
 * keeps serving the last valid certificate; that one is held here, so a fresh process (`status`, `plan`, the
 * daemon after a restart or SIGHUP) serves the same certificate the running daemon does and gives the same answer.
 * Read when the source first loads; written when what is held changes; never by plan or status.
 */
import { nameSet, parseBundle } from "../../certificates/index.js";
import { describeError } from "../../errors.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import {
	type HeldCertificate,
	readSourceMemory,
	type SourceMemoryRecord,
	sourceMemoryKey,
	writeSourceMemory,
} from "../../store/records.js";
import type { StateStore } from "../../store/types.js";

export interface Held {
	certificate: DesiredCertificate;
	/** The file(s) it was read from. */
	file: string;
	since: Date;
}

export interface SourceMemory {
	/** What was held at the last save, by certificate name; an entry that no longer parses is left out. */
	load(): Promise<Map<string, Held>>;
	/** Replaces what is held (written only when it changed). */
	save(held: readonly Held[]): Promise<void>;
}

export interface SourceMemoryDeps {
	store: StateStore;
	/** plan and status: load, never save. */
	readOnly: boolean;
	warn: (fields: Record<string, unknown>, message: string) => void;
}

export function storedSourceMemory(source: string, deps: SourceMemoryDeps): SourceMemory {
	const key = sourceMemoryKey(source);
	const where = () => deps.store.location?.(key) ?? key;
	// undefined: the record could not be read, so it is not replaced (an operator may restore it).
	let version: number | undefined = 0;
	let stored = "{}";
	return {
		async load() {
			const out = new Map<string, Held>();
			let record: Awaited<ReturnType<typeof readSourceMemory>>;
			try {
				record = await readSourceMemory(deps.store, source);
			} catch (e) {
				version = undefined;
				deps.warn(
					{ source, file: where(), error: describeError(e) },
					"directory source memory unreadable: serving what the files hold now; delete the file to let certificatee write it again",
				);
				return out;
			}
			version = record?.version ?? 0;
			stored = identity(record?.value.held ?? {});
			for (const [name, h] of Object.entries(record?.value.held ?? {})) {
				try {
					const bundle = parseBundle(
						{ cert: h.certPem, chain: h.chainPem, key: h.keyPem },
						{ source: `${where()} (${name})` },
					);
					out.set(name, {
						certificate: {
							name,
							names: nameSet([...bundle.leaf.dnsNames, ...bundle.leaf.ipAddresses]),
							bundle,
							origin: `source ${source}: ${h.file}`,
						},
						file: h.file,
						since: new Date(h.heldSince),
					});
				} catch (e) {
					deps.warn(
						{ source, certificate: name, file: where(), error: describeError(e) },
						"a certificate held by the directory source does not parse: dropped",
					);
				}
			}
			return out;
		},
		async save(held) {
			if (deps.readOnly || version === undefined) return;
			const value: SourceMemoryRecord = { held: {} };
			for (const h of [...held].sort((a, b) => a.certificate.name.localeCompare(b.certificate.name))) {
				const { bundle } = h.certificate;
				value.held[h.certificate.name] = {
					certPem: bundle.certPem,
					chainPem: bundle.chainPem,
					keyPem: bundle.key.reveal(),
					file: h.file,
					serial: bundle.leaf.serial,
					fingerprint: bundle.leaf.fingerprint,
					notAfter: bundle.leaf.notAfter.toISOString(),
					heldSince: h.since.toISOString(),
				};
			}
			const next = identity(value.held);
			if (next === stored) return;
			try {
				version = await writeSourceMemory(deps.store, source, value, version);
				stored = next;
			} catch (e) {
				deps.warn(
					{ source, file: where(), error: describeError(e) },
					"directory source memory not saved (a fresh process may serve another certificate); tried again at the next change",
				);
				version = await deps.store.get(key).then(
					(r) => r?.version ?? 0,
					() => undefined,
				);
			}
		},
	};
}

/** What decides whether a save changes anything: which certificate is held under which name, since when. */
function identity(held: Record<string, Pick<HeldCertificate, "fingerprint" | "file" | "heldSince">>): string {
	return JSON.stringify(
		Object.keys(held)
			.sort()
			.map((n) => [n, held[n]?.fingerprint, held[n]?.file, held[n]?.heldSince]),
	);
}
