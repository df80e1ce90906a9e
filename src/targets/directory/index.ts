/**
 * The directory target: writes each desired certificate as files in a layout other programs read
 * (kubernetes-tls, haproxy-pem, split), through atomicdir so no reader sees a half-updated set, and runs
 * on_change once per certificate whose files actually changed. `planDirectoryTarget` is the read-only
 * half for `certificatee plan`. One certificate's failure never stops the others: it is a value.
 */
import { mkdir, readFile } from "node:fs/promises";
import {
	diffDirectory,
	diffFile,
	isSymlinkLayout,
	type Owner,
	type SyncOptions,
	syncDirectory,
	writeFileAtomic,
} from "../../atomicdir/index.js";
import { CertificateeError, describeError, isCertificateeError } from "../../errors.js";
import { selectCertificates } from "../../reconcile/cycle.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import { type HookResult, runHook } from "./hook.js";
import { type FileSet, fileSetFor, setDirectory } from "./layouts.js";
import { resolveOwner } from "./owner.js";
import { type PendingHooks, pendingHooksInMemory } from "./pending-hooks.js";
import type { DirectoryTargetConfig } from "./schema.js";

export { type DirectoryTargetConfig, directoryTargetSchema } from "./schema.js";

export type CertificateOutcome =
	| {
			certificate: string;
			path: string;
			status: "unchanged";
			problems: CertificateeError[];
			/** on_change run again because it had not succeeded since the files last changed. */
			hook?: HookResult;
	  }
	| {
			certificate: string;
			path: string;
			status: "written";
			/** What differed before the write, e.g. "tls.key: content differs". */
			differences: string[];
			/** Failures after publishing (cleanup, parent fsync): the new files are live. */
			problems: CertificateeError[];
			/** Present when on_change is configured. */
			hook?: HookResult;
	  }
	| { certificate: string; path: string; status: "failed"; error: CertificateeError };

export interface DirectoryTargetResult {
	target: string;
	layout: DirectoryTargetConfig["layout"];
	certificates: CertificateOutcome[];
}

export type PlannedCertificate =
	| { certificate: string; path: string; status: "unchanged" }
	| { certificate: string; path: string; status: "would-write"; differences: string[] }
	| { certificate: string; path: string; status: "failed"; error: CertificateeError };

export interface DirectoryTargetPlan {
	target: string;
	layout: DirectoryTargetConfig["layout"];
	certificates: PlannedCertificate[];
}

/** Test and bench knobs passed through to atomicdir. */
export type DirectoryTargetOptions = Pick<SyncOptions, "durable" | "binding" | "now" | "lockTimeoutMs"> & {
	/** Where failed on_change runs are remembered until they succeed (default: in memory, per call). */
	pendingHooks?: PendingHooks;
};

type Prepared = { set: FileSet } | { certificate: string; path: string; error: CertificateeError };

export async function syncDirectoryTarget(
	config: DirectoryTargetConfig,
	desired: readonly DesiredCertificate[],
	options: DirectoryTargetOptions = {},
): Promise<DirectoryTargetResult> {
	const { owner, prepared } = await prepare(config, desired);
	if (prepared.some((p) => "set" in p) && sharesBaseDirectory(config)) await ensureDirectory(config.path);
	const pending = options.pendingHooks ?? pendingHooksInMemory();
	const certificates: CertificateOutcome[] = [];
	for (const p of prepared) {
		if ("error" in p) certificates.push({ ...p, status: "failed" });
		else certificates.push(await writeSet(config, p.set, owner, options, pending));
	}
	return { target: config.name, layout: config.layout, certificates };
}

/** What syncDirectoryTarget would change, without writing anything. */
export async function planDirectoryTarget(
	config: DirectoryTargetConfig,
	desired: readonly DesiredCertificate[],
): Promise<DirectoryTargetPlan> {
	const { owner, prepared } = await prepare(config, desired);
	const certificates: PlannedCertificate[] = [];
	for (const p of prepared) {
		if ("error" in p) {
			certificates.push({ ...p, status: "failed" });
			continue;
		}
		const { set } = p;
		try {
			const differences =
				set.kind === "file" ? diffFile(set.path, set.file, owner) : await diffSet(config, set, owner);
			certificates.push(
				differences.length === 0
					? { certificate: set.certificate, path: set.path, status: "unchanged" }
					: { certificate: set.certificate, path: set.path, status: "would-write", differences },
			);
		} catch (e) {
			certificates.push({
				certificate: set.certificate,
				path: set.path,
				status: "failed",
				error: asError(e, set.path),
			});
		}
	}
	return { target: config.name, layout: config.layout, certificates };
}

async function diffSet(config: DirectoryTargetConfig, set: FileSet & { kind: "directory" }, owner?: Owner) {
	const swap =
		config.swap === "symlink" || (config.swap === "exchange-or-symlink" && isSymlinkLayout(set.path))
			? "symlink"
			: "exchange";
	const diff = await diffDirectory(set.path, set.files, { swap, dirMode: config.dir_mode, owner });
	return diff.differences;
}

async function writeSet(
	config: DirectoryTargetConfig,
	set: FileSet,
	owner: Owner | undefined,
	options: DirectoryTargetOptions,
	pending: PendingHooks,
): Promise<CertificateOutcome> {
	const base = { certificate: set.certificate, path: set.path };
	let outcome: { status: "unchanged" | "written"; differences: string[]; problems: CertificateeError[] };
	try {
		outcome =
			set.kind === "file"
				? await writeFileAtomic(set.path, set.file, { ...options, owner })
				: await syncDirectory(set.path, set.files, {
						...options,
						owner,
						swap: config.swap,
						dirMode: config.dir_mode,
					});
	} catch (e) {
		return { ...base, status: "failed", error: asError(e, set.path) };
	}
	if (outcome.status === "unchanged") {
		const unchanged = { ...base, status: "unchanged" as const, problems: outcome.problems };
		if (config.on_change === undefined || !(await pending.has(set.certificate))) return unchanged;
		return { ...unchanged, hook: await onChange(config, config.on_change, set, pending) };
	}
	const written = {
		...base,
		status: "written" as const,
		differences: outcome.differences,
		problems: outcome.problems,
	};
	if (config.on_change === undefined) return written;
	return { ...written, hook: await onChange(config, config.on_change, set, pending) };
}

/** Runs on_change, remembered as pending until it succeeds. */
async function onChange(
	config: DirectoryTargetConfig,
	hookConfig: NonNullable<DirectoryTargetConfig["on_change"]>,
	set: FileSet,
	pending: PendingHooks,
): Promise<HookResult> {
	await pending.mark(set.certificate);
	const hook = await runHook({
		command: hookConfig.command,
		timeoutMs: hookConfig.timeout,
		env: {
			CERTIFICATEE_TARGET: config.name,
			CERTIFICATEE_CERTIFICATE: set.certificate,
			CERTIFICATEE_PATH: set.path,
			CERTIFICATEE_LAYOUT: config.layout,
		},
	});
	if (hook.ok) await pending.clear(set.certificate);
	return hook;
}

/** Selected certificates as file sets; a listed certificate that is not desired is a failure, files untouched. */
async function prepare(config: DirectoryTargetConfig, desired: readonly DesiredCertificate[]) {
	const prepared: Prepared[] = [];
	let owner: Owner | undefined;
	let caPem: string | undefined;
	try {
		owner = config.owner === undefined ? undefined : await resolveOwner(config.owner, config.name);
		caPem = config.ca_file === undefined ? undefined : await readCa(config.ca_file, config.name);
	} catch (e) {
		const error = asError(e, config.path);
		return {
			owner,
			prepared: selectCertificates(desired, config.certificates).map((c) => failed(c.name, config, error)),
		};
	}
	for (const cert of selectCertificates(desired, config.certificates)) {
		try {
			prepared.push({
				set: fileSetFor(cert, config, config.layout === "kubernetes-tls" ? caPem : undefined),
			});
		} catch (e) {
			prepared.push(failed(cert.name, config, asError(e, config.path)));
		}
	}
	for (const name of config.certificates ?? []) {
		if (desired.some((d) => d.name === name)) continue;
		const error = new CertificateeError(
			"NOT_AVAILABLE",
			`certificate ${name} is not in the desired set; its files are left as they are`,
			{
				context: { target: config.name, certificate: name },
				hint: "check the certificate's source (see the source problems of this cycle) or the target's certificates list",
				retryable: true,
			},
		);
		prepared.push(failed(name, config, error));
	}
	return { owner, prepared };
}

function failed(name: string, config: DirectoryTargetConfig, error: CertificateeError): Prepared {
	const path = config.layout === "haproxy-pem" ? `${config.path}/${name}.pem` : setDirectory(name, config);
	return { certificate: name, path, error };
}

async function readCa(path: string, target: string): Promise<string> {
	try {
		return await readFile(path, "utf8");
	} catch (e) {
		throw new CertificateeError("SOURCE_UNREADABLE", `ca_file ${path} is unreadable: ${describeError(e)}`, {
			context: { target, file: path, field: "ca_file" },
			hint: "point ca_file at a readable PEM file, or remove it",
			cause: e,
		});
	}
}

/** haproxy-pem, and several certificates in per-certificate directories, write under `path` itself. */
function sharesBaseDirectory(config: DirectoryTargetConfig): boolean {
	return config.layout === "haproxy-pem" || config.certificates?.length !== 1;
}

/** Creates `path` (not its parents) when missing; a failure shows up on each certificate. */
async function ensureDirectory(path: string): Promise<void> {
	await mkdir(path, { mode: 0o755 }).catch(() => {});
}

function asError(e: unknown, path: string): CertificateeError {
	if (isCertificateeError(e)) return e;
	return new CertificateeError("ATOMICDIR_SWAP_FAILED", `${path}: ${describeError(e)}`, {
		context: { file: path },
		cause: e,
	});
}
