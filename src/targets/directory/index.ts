/**
 * The directory target's driver: observe() reads how the files of each desired certificate differ from the
 * set they should be (layouts kubernetes-tls, haproxy-pem, split); apply() performs one DirectoryAction:
 * publish a certificate's set through atomicdir, so no reader sees a half-updated set, or run on_change for
 * it. plan.ts decides (pure), runner.ts runs the four steps. One certificate's failure never stops the
 * others: it is a value.
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
import { leafMeta } from "../../reconcile/leaf-meta.js";
import type { ActionResult, DesiredCertificate, RefMeta } from "../../reconcile/model.js";
import type { DirectoryAction } from "./action.js";
import { runHook } from "./hook.js";
import { type FileSet, fileSetFor, leafFileOf, setDirectory } from "./layouts.js";
import { resolveOwner } from "./owner.js";
import { type PendingHooks, pendingHooksInMemory } from "./pending-hooks.js";
import type { DirectoryTargetConfig } from "./schema.js";

export { type DirectoryTargetConfig, directoryTargetSchema } from "./schema.js";

/** One desired certificate's set as observed: how its files differ from it, or why it cannot be written. */
export type ObservedSet =
	| {
			certificate: string;
			path: string;
			ok: true;
			/** What differs on disk, e.g. "tls.key: content differs"; empty when the set is in sync. */
			differences: string[];
			/** False when the set has no files yet (a directory layout whose directory is absent): it is missing. */
			exists: boolean;
			/** on_change has not succeeded since the files last changed: it is run again. */
			hookPending: boolean;
			/** What the set's certificate file holds now, when it differs and can be read (never downgrade). */
			live?: RefMeta;
	  }
	| { certificate: string; path: string; ok: false; error: CertificateeError };

export interface DirectoryObservation {
	/** The target's path: a directory target is one endpoint. */
	endpoint: string;
	sets: ObservedSet[];
}

/** Observe the sets of the desired certificates; apply one write. Neither throws for a certificate's failure. */
export interface DirectoryDriver {
	readonly name: string;
	/** `awaiting`: listed certificates not issued yet, left out (pending, not failed: runCycle's `awaiting`). */
	observe(
		desired: readonly DesiredCertificate[],
		signal: AbortSignal,
		awaiting?: readonly string[],
	): Promise<DirectoryObservation>;
	apply(action: DirectoryAction, signal: AbortSignal): Promise<ActionResult>;
}

/** Test and bench knobs passed through to atomicdir. */
export type DirectoryTargetOptions = Pick<SyncOptions, "durable" | "binding" | "now" | "lockTimeoutMs"> & {
	/** Where failed on_change runs are remembered until they succeed (default: in memory, per driver). */
	pendingHooks?: PendingHooks;
};

type Prepared = { set: FileSet } | { certificate: string; path: string; error: CertificateeError };

export function createDirectoryDriver(
	config: DirectoryTargetConfig,
	options: DirectoryTargetOptions = {},
): DirectoryDriver {
	const pending = options.pendingHooks ?? pendingHooksInMemory();
	return {
		name: config.path,
		async observe(desired, _signal, awaiting = []) {
			const { owner, prepared } = await prepare(config, desired, awaiting);
			const sets: ObservedSet[] = [];
			for (const p of prepared) {
				if ("error" in p) sets.push({ certificate: p.certificate, path: p.path, ok: false, error: p.error });
				else sets.push(await observeSet(config, p.set, owner, pending));
			}
			return { endpoint: config.path, sets };
		},
		async apply(action) {
			switch (action.op) {
				case "directory-write":
					return writeSet(config, action, options);
				case "on-change":
					return onChange(config, action, pending);
			}
		},
	};
}

async function observeSet(
	config: DirectoryTargetConfig,
	set: FileSet,
	owner: Owner | undefined,
	pending: PendingHooks,
): Promise<ObservedSet> {
	const base = { certificate: set.certificate, path: set.path };
	try {
		const { differences, exists } =
			set.kind === "file"
				? { differences: diffFile(set.path, set.file, owner), exists: true }
				: await diffSet(config, set, owner);
		const hookPending = config.on_change !== undefined && (await pending.has(set.certificate));
		const live = differences.length > 0 ? await liveCertificate(set) : undefined;
		return { ...base, ok: true, differences, exists, hookPending, ...(live ? { live } : {}) };
	} catch (e) {
		return { ...base, ok: false, error: asError(e, set.path) };
	}
}

/** The leaf the set's files hold now; undefined when there is none to read (a new set, a file that is no PEM). */
async function liveCertificate(set: FileSet): Promise<RefMeta | undefined> {
	const pem = await readFile(leafFileOf(set), "utf8").catch(() => undefined);
	const meta = pem === undefined ? {} : leafMeta(pem);
	return meta.notAfter === undefined ? undefined : meta;
}

async function diffSet(config: DirectoryTargetConfig, set: FileSet & { kind: "directory" }, owner?: Owner) {
	const swap =
		config.swap === "symlink" || (config.swap === "exchange-or-symlink" && isSymlinkLayout(set.path))
			? "symlink"
			: "exchange";
	return diffDirectory(set.path, set.files, { swap, dirMode: config.dir_mode, owner });
}

/** Publishes the set; failures after publishing (cleanup, parent fsync) are a note: the new files are live. */
async function writeSet(
	config: DirectoryTargetConfig,
	action: Extract<DirectoryAction, { op: "directory-write" }>,
	options: DirectoryTargetOptions,
): Promise<ActionResult> {
	try {
		const owner = config.owner === undefined ? undefined : await resolveOwner(config.owner, config.name);
		const caPem =
			config.ca_file === undefined || config.layout !== "kubernetes-tls"
				? undefined
				: await readCa(config.ca_file, config.name);
		const set = fileSetFor(
			{ name: action.certificate, names: [], bundle: action.bundle, origin: "" },
			config,
			caPem,
		);
		if (sharesBaseDirectory(config)) await ensureDirectory(config.path);
		const outcome =
			set.kind === "file"
				? await writeFileAtomic(set.path, set.file, {
						...options,
						owner,
						allowWritableParent: config.allow_writable_parent,
					})
				: await syncDirectory(set.path, set.files, {
						...options,
						owner,
						allowWritableParent: config.allow_writable_parent,
						swap: config.swap,
						dirMode: config.dir_mode,
					});
		const notes = [
			...(outcome.status === "unchanged" ? ["the files were already up to date"] : []),
			...outcome.problems.map((p) => p.message),
		];
		return { action, ok: true, ...(notes.length > 0 ? { note: notes.join("; ") } : {}) };
	} catch (e) {
		return { action, ok: false, error: asError(e, action.ref) };
	}
}

/** Runs on_change, remembered as pending until it succeeds (marked first: a crash in between retries it). */
async function onChange(
	config: DirectoryTargetConfig,
	action: Extract<DirectoryAction, { op: "on-change" }>,
	pending: PendingHooks,
): Promise<ActionResult> {
	if (config.on_change === undefined) return { action, ok: true, note: "no on_change configured" };
	await pending.mark(action.certificate);
	const hook = await runHook({
		command: config.on_change.command,
		timeoutMs: config.on_change.timeout,
		env: {
			CERTIFICATEE_TARGET: config.name,
			CERTIFICATEE_CERTIFICATE: action.certificate,
			CERTIFICATEE_PATH: action.ref,
			CERTIFICATEE_LAYOUT: config.layout,
		},
	});
	if (!hook.ok) return { action, ok: false, error: hook.error };
	await pending.clear(action.certificate);
	return { action, ok: true };
}

/**
 * Selected certificates as file sets; a listed certificate that is not desired is a failure, files untouched,
 * unless it is awaited (an issued certificate with none yet: the views say pending, "not issued yet").
 */
async function prepare(
	config: DirectoryTargetConfig,
	desired: readonly DesiredCertificate[],
	awaiting: readonly string[],
) {
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
		if (desired.some((d) => d.name === name) || awaiting.includes(name)) continue;
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
