/**
 * What a directory source last served, kept in the state store (`sources/<source>/<bucket>`), so a fresh process
 * (`status`, `plan`, `sync --once`, the daemon after a restart or SIGHUP) decides from the same memory as the
 * running daemon: when a file turns invalid (a key that does not match, say) or is replaced by a certificate that
 * expires earlier, every process keeps serving the last valid certificate and gives the same answer. Kept like
 * issued certificates (0600 files in state_dir, with their keys), in 16 records by a hash of the name, so a
 * change rewrites one sixteenth; an entry is parsed only when it is served in place of its file.
 * Read when the source first loads; written when what is served changes; never by plan or status.
 */
import { createHash } from "node:crypto";
import { parseBundle } from "../../certificates/index.js";
import { describeError } from "../../errors.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import {
	readSourceMemory,
	type ServedEntry,
	type SourceMemoryRecord,
	sourceMemoryKey,
	writeSourceMemory,
} from "../../store/records.js";
import type { StateStore } from "../../store/types.js";

/** A certificate served by an earlier load: its facts, and the certificate itself (parsed when asked). */
export interface Previous {
	names: readonly string[];
	notAfter: Date;
	fingerprint: string;
	/** The file(s) it was read from. */
	file: string;
	/** When this certificate was first served under its name. */
	since: Date;
	/** Undefined when the stored copy no longer parses (reported once as a warning). */
	certificate(): DesiredCertificate | undefined;
}

export interface SourceMemory {
	/** What the source served at its last save, by certificate name. */
	load(): Promise<Map<string, Previous>>;
	/** Replaces what is remembered (only the records that changed are written). */
	save(served: ReadonlyMap<string, Previous>): Promise<void>;
}

export interface SourceMemoryDeps {
	store: StateStore;
	/** plan and status: load, never save. */
	readOnly: boolean;
	warn: (fields: Record<string, unknown>, message: string) => void;
}

const BUCKETS = 16;
const bucketOf = (name: string) => createHash("sha256").update(name).digest()[0]! % BUCKETS;

/** A certificate served now, as an earlier load's memory of it. */
export function previousOf(certificate: DesiredCertificate, file: string, since: Date): Previous {
	const leaf = certificate.bundle.leaf;
	return {
		names: certificate.names,
		notAfter: leaf.notAfter,
		fingerprint: leaf.fingerprint,
		file,
		since,
		certificate: () => certificate,
	};
}

export function storedSourceMemory(source: string, deps: SourceMemoryDeps): SourceMemory {
	const key = (b: number) => `${sourceMemoryKey(source)}/${b.toString(16)}`;
	const where = (b: number) => deps.store.location?.(key(b)) ?? key(b);
	// Per bucket: the version to replace (undefined: unreadable, left alone) and the identity of what it holds.
	const versions = new Map<number, number | undefined>();
	const stored = new Map<number, string>();
	return {
		async load() {
			const out = new Map<string, Previous>();
			for (let b = 0; b < BUCKETS; b++) {
				let record: Awaited<ReturnType<typeof readSourceMemory>>;
				try {
					record = await readSourceMemory(deps.store, key(b));
				} catch (e) {
					versions.set(b, undefined);
					deps.warn(
						{ source, file: where(b), error: describeError(e) },
						"directory source memory unreadable: its certificates are served as their files hold them now; delete the file to let certificatee write it again",
					);
					continue;
				}
				versions.set(b, record?.version ?? 0);
				const served = record?.value.served ?? {};
				stored.set(
					b,
					identityOf(
						Object.keys(served)
							.sort()
							.map((n) => {
								const e = served[n] as ServedEntry;
								return [n, { fingerprint: e.fingerprint, file: e.file, since: new Date(e.since) }] as const;
							}),
					),
				);
				for (const [name, entry] of Object.entries(served)) out.set(name, fromEntry(name, entry, where(b)));
			}
			return out;
		},
		async save(served) {
			if (deps.readOnly) return;
			const byBucket = new Map<number, string[]>();
			for (let b = 0; b < BUCKETS; b++) byBucket.set(b, []);
			for (const name of [...served.keys()].sort()) byBucket.get(bucketOf(name))?.push(name);
			for (const [b, names] of byBucket) {
				// Only a record whose certificates changed is built and written (its keys revealed only then).
				const next = identityOf(names.map((n) => [n, served.get(n) as Previous]));
				if (next === (stored.get(b) ?? identityOf([]))) continue;
				const version = versions.has(b) ? versions.get(b) : 0;
				if (version === undefined) continue;
				const value: SourceMemoryRecord = { served: {} };
				for (const name of names) {
					const p = served.get(name) as Previous;
					const certificate = p.certificate();
					if (certificate === undefined) continue;
					const { bundle } = certificate;
					value.served[name] = {
						certPem: bundle.certPem,
						chainPem: bundle.chainPem,
						keyPem: bundle.key.reveal(),
						names: [...certificate.names],
						file: p.file,
						serial: bundle.leaf.serial,
						fingerprint: bundle.leaf.fingerprint,
						notAfter: bundle.leaf.notAfter.toISOString(),
						since: p.since.toISOString(),
					};
				}
				try {
					versions.set(b, await writeSourceMemory(deps.store, key(b), value, version));
					stored.set(b, next);
				} catch (e) {
					deps.warn(
						{ source, file: where(b), error: describeError(e) },
						"directory source memory not saved (a fresh process may serve another certificate); tried again at the next change",
					);
					versions.set(
						b,
						await deps.store.get(key(b)).then(
							(r) => r?.version ?? 0,
							() => undefined,
						),
					);
				}
			}
		},
	};

	function fromEntry(name: string, entry: ServedEntry, file: string): Previous {
		let parsed: DesiredCertificate | undefined | null = null;
		return {
			names: entry.names,
			notAfter: new Date(entry.notAfter),
			fingerprint: entry.fingerprint,
			file: entry.file,
			since: new Date(entry.since),
			certificate() {
				if (parsed !== null) return parsed;
				try {
					const bundle = parseBundle(
						{ cert: entry.certPem, chain: entry.chainPem, key: entry.keyPem },
						{ source: `${file} (${name})` },
					);
					parsed = { name, names: entry.names, bundle, origin: `source ${source}: ${entry.file}` };
				} catch (e) {
					parsed = undefined;
					deps.warn(
						{ source, certificate: name, file, error: describeError(e) },
						"a certificate the directory source remembers does not parse: not served in place of its file",
					);
				}
				return parsed;
			},
		};
	}
}

/** What decides whether a save changes a record: which certificate under which name, from which file, since when. */
function identityOf(
	entries: ReadonlyArray<readonly [string, Pick<Previous, "fingerprint" | "file" | "since">]>,
): string {
	return JSON.stringify(entries.map(([n, p]) => [n, p.fingerprint, p.file, p.since.getTime()]));
}
