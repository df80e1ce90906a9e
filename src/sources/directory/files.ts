/**
 * Which files of a directory make which certificate. Pure: a list of file names in, candidates and problems out.
 *   name.pem                          a combined file (leaf, chain, key in any order)
 *   name.crt + name.key [+ name.chain.pem]   a split certificate
 * The certificate's name is the file stem. Hidden files, other extensions and sub-directories are ignored.
 */
export type Candidate =
	| { name: string; kind: "combined"; file: string }
	| { name: string; kind: "split"; cert: string; key: string; chain?: string };

export interface FileProblem {
	file: string;
	code: "BUNDLE_NO_KEY" | "BUNDLE_NO_CERTIFICATE" | "SOURCE_DUPLICATE_NAME";
	/** Without the file name, which the caller puts first. */
	message: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function stem(file: string, ext: string): string | undefined {
	return file.endsWith(ext) ? file.slice(0, -ext.length) : undefined;
}

export function groupFiles(files: readonly string[]): { candidates: Candidate[]; problems: FileProblem[] } {
	const present = new Set(files.filter((f) => !f.startsWith(".")));
	const candidates: Candidate[] = [];
	const problems: FileProblem[] = [];
	const used = new Set<string>();
	for (const file of [...present].sort()) {
		const chainStem = stem(file, ".chain.pem");
		if (chainStem !== undefined) {
			if (!present.has(`${chainStem}.crt`)) {
				problems.push({
					file,
					code: "BUNDLE_NO_CERTIFICATE",
					message: `chain file without ${chainStem}.crt`,
				});
			}
			continue;
		}
		const pemStem = stem(file, ".pem");
		if (pemStem !== undefined && NAME.test(pemStem)) {
			candidates.push({ name: pemStem, kind: "combined", file });
			used.add(pemStem);
		}
	}
	for (const file of [...present].sort()) {
		const crtStem = stem(file, ".crt");
		const keyStem = stem(file, ".key");
		if (crtStem !== undefined && NAME.test(crtStem)) {
			if (used.has(crtStem)) {
				problems.push({
					file,
					code: "SOURCE_DUPLICATE_NAME",
					message: `${crtStem}.pem already defines certificate "${crtStem}"; the .crt/.key pair is ignored`,
				});
			} else if (!present.has(`${crtStem}.key`)) {
				problems.push({ file, code: "BUNDLE_NO_KEY", message: `no ${crtStem}.key beside it` });
			} else {
				const chain = present.has(`${crtStem}.chain.pem`) ? `${crtStem}.chain.pem` : undefined;
				candidates.push({
					name: crtStem,
					kind: "split",
					cert: file,
					key: `${crtStem}.key`,
					...(chain ? { chain } : {}),
				});
			}
		} else if (keyStem !== undefined && NAME.test(keyStem) && !present.has(`${keyStem}.crt`)) {
			if (!used.has(keyStem)) {
				problems.push({
					file,
					code: "BUNDLE_NO_CERTIFICATE",
					message: `no ${keyStem}.crt beside it`,
				});
			}
		}
	}
	return { candidates: candidates.sort((a, b) => a.name.localeCompare(b.name)), problems };
}

/** The files a candidate is made of, for reports. */
export function candidateFiles(c: Candidate): string[] {
	return c.kind === "combined" ? [c.file] : [c.cert, ...(c.chain ? [c.chain] : []), c.key];
}
