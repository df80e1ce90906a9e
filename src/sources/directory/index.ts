/**
 * `type: directory`: serves the valid certificates found in a directory of PEM files (see files.ts for the
 * layout). Each file is parsed and checked with the certificate model; an invalid one is reported with its
 * reason and skipped while the others are served. watch() lets the daemon react to changes promptly.
 */
import { type FSWatcher, watch as fsWatch } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { loadBundle } from "../../certificates/index.js";
import { CertificateeError, describeError } from "../../errors.js";
import type { DesiredCertificate, SourceProblem } from "../../reconcile/model.js";
import type { Source } from "../types.js";
import { type Candidate, candidateFiles, groupFiles } from "./files.js";
import { type DirectorySourceConfig, directorySourceSchema } from "./schema.js";
import { type LoadedFile, selectNewest } from "./select.js";

export { type DirectorySourceConfig, directorySourceSchema };

export interface DirectorySourceDeps {
	clock?: () => Date;
}

/** A directory source always watches: onChange runs once the directory has been quiet for `debounce`. */
export type WatchableSource = Source & Required<Pick<Source, "watch">>;

async function readCandidate(dir: string, c: Candidate, now: Date) {
	const read = (f: string) => readFile(join(dir, f));
	const source = join(dir, c.kind === "combined" ? c.file : c.cert);
	const input =
		c.kind === "combined"
			? { combined: await read(c.file) }
			: {
					cert: await read(c.cert),
					key: await read(c.key),
					...(c.chain ? { chain: await read(c.chain) } : {}),
				};
	return loadBundle(input, { source, now });
}

export function createDirectorySource(
	config: DirectorySourceConfig,
	deps: DirectorySourceDeps = {},
): WatchableSource {
	const clock = deps.clock ?? (() => new Date());
	let previous = new Map<string, DesiredCertificate>();
	const subjectOf = (c: Candidate) =>
		candidateFiles(c)
			.map((f) => join(config.path, f))
			.join(" + ");

	async function load(signal: AbortSignal) {
		const now = clock();
		let files: string[];
		try {
			files = (await readdir(config.path, { withFileTypes: true }))
				.filter((e) => !e.isDirectory())
				.map((e) => e.name);
		} catch (e) {
			const error = new CertificateeError(
				"SOURCE_UNREADABLE",
				`source "${config.name}": cannot read directory ${config.path}: ${describeError(e)}`,
				{ context: { file: config.path }, hint: "check the path and its permissions", retryable: true },
			);
			// Keep serving what was valid before rather than dropping every certificate.
			return { certificates: [...previous.values()], problems: [{ subject: config.path, error }] };
		}
		const grouped = groupFiles(files);
		const problems: SourceProblem[] = grouped.problems.map((p) => ({
			subject: join(config.path, p.file),
			error: new CertificateeError(p.code, `${join(config.path, p.file)}: ${p.message}`, {
				context: { file: join(config.path, p.file) },
			}),
		}));
		const loaded: LoadedFile[] = [];
		const invalid = new Set<string>();
		for (const c of grouped.candidates) {
			signal.throwIfAborted();
			const subject = subjectOf(c);
			try {
				const result = await readCandidate(config.path, c, now);
				if (result.ok) loaded.push({ name: c.name, subject, bundle: result.bundle });
				else {
					invalid.add(c.name);
					for (const error of result.problems) problems.push({ subject, error });
				}
			} catch (e) {
				invalid.add(c.name);
				problems.push({
					subject,
					error: new CertificateeError("SOURCE_UNREADABLE", `${subject}: ${describeError(e)}`, {
						context: { file: subject },
						retryable: true,
					}),
				});
			}
		}
		const { served, skipped } = selectNewest({
			loaded,
			previous,
			invalid,
			now,
			origin: (s) => `source ${config.name}: ${s}`,
		});
		for (const s of skipped) {
			problems.push({
				subject: s.subject,
				error: new CertificateeError("SOURCE_OLDER", s.message, { context: { file: s.subject } }),
			});
		}
		previous = new Map(served.map((d) => [d.name, d]));
		return { certificates: served, problems };
	}

	function watch(onChange: () => void): () => void {
		let timer: NodeJS.Timeout | undefined;
		let watcher: FSWatcher | undefined;
		const fire = () => {
			clearTimeout(timer);
			timer = setTimeout(onChange, config.debounce);
		};
		try {
			watcher = fsWatch(config.path, { persistent: false }, fire);
			// The directory may disappear; the next load reports it.
			watcher.on("error", fire);
		} catch {
			// Not watchable now (missing): periodic loads still pick it up.
		}
		return () => {
			clearTimeout(timer);
			watcher?.close();
		};
	}

	return { name: config.name, load, watch };
}
