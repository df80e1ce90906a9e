/**
 * `certificatee validate`: the configuration and every source's certificates, all problems listed.
 * `--config-only` (the systemd unit's ExecStartPre): source-file problems are reported as warnings and do not
 * fail, because the daemon starts without a bad source file and serves the rest.
 */

import { loadTrustStore, verifyBundle } from "../../certificates/trust.js";
import { type ConfigProblem, configProblems, formatProblem } from "../../config/load.js";
import type { Config } from "../../config/schema.js";
import { isCertificateeError } from "../../errors.js";
import { buildSources } from "../../sources/registry.js";
import { openFileStore } from "../../store/file-store.js";
import { stateDirProblem } from "../../store/lock.js";
import { canonicalCollisions } from "../../targets/haproxy/naming.js";
import type { CommandContext } from "../context.js";
import { EXIT, ExitError } from "../exit.js";
import type { OnlineCheck } from "./online.js";

export interface ValidationReport {
	file: string;
	ok: boolean;
	problems: ConfigProblem[];
	/** `--config-only`: source-file problems, reported without failing. */
	warnings: ConfigProblem[];
	/** `--online`: each address contacted (only when the configuration itself is valid). */
	online?: OnlineCheck[];
}

export interface ValidateOptions {
	configOnly?: boolean;
	online?: boolean;
}

export async function validateCommand(ctx: CommandContext, options: ValidateOptions = {}): Promise<void> {
	let report: ValidationReport;
	const file = ctx.options.config ?? "(default)";
	try {
		const loaded = ctx.loadConfig();
		const fromSources = await sourceProblems(loaded.config);
		// Even with --config-only: the daemon cannot start without its state directory.
		const state = stateDirProblem(loaded.config.state_dir);
		const problems = [
			...(state
				? [
						{
							path: "state_dir",
							code: state.code,
							message: state.message,
							...(state.hint ? { hint: state.hint } : {}),
						},
					]
				: []),
			// A trust store that cannot be read stops the daemon: a problem even with --config-only.
			...trustProblems(loaded.config, []).stores,
			...(options.configOnly ? [] : fromSources),
		];
		const warnings = options.configOnly ? fromSources : [];
		// The HTTP client and the targets' drivers are loaded only for --online.
		const online = options.online
			? await (await import("./online.js")).runOnlineChecks(loaded.config)
			: undefined;
		report = {
			file: loaded.file,
			ok: problems.length === 0 && (online ?? []).every((c) => c.ok),
			problems,
			warnings,
			...(online ? { online } : {}),
		};
	} catch (e) {
		if (!isCertificateeError(e)) throw e;
		const problems = configProblems(e);
		report = {
			file: e.context.file ?? file,
			ok: false,
			problems:
				problems.length > 0
					? problems
					: [{ path: "(file)", code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) }],
			warnings: [],
		};
	}
	if (ctx.options.json) ctx.out(JSON.stringify(report, null, 2));
	else printReport(ctx, report);
	if (!report.ok) throw new ExitError(EXIT.error);
}

/** The report for a human: the file's verdict, then each problem with its hint, each warning, the online checks. */
function printReport(ctx: CommandContext, report: ValidationReport): void {
	const n = report.problems.length;
	ctx.out(n === 0 ? `${report.file}: valid` : `${report.file}: ${n} problem${n === 1 ? "" : "s"}`);
	for (const p of report.problems) {
		ctx.out(`  ${formatProblem(p)}`);
		if (p.hint) ctx.out(`    hint: ${p.hint}`);
	}
	for (const p of report.warnings) ctx.out(`  warning: ${formatProblem(p)} (the daemon skips it)`);
	if (report.online) printOnline(ctx, report.online);
}

function printOnline(ctx: CommandContext, checks: OnlineCheck[]): void {
	const failed = checks.filter((c) => !c.ok).length;
	ctx.out(
		`online: ${checks.length - failed}/${checks.length} ok${checks.length === 0 ? " (nothing to contact)" : ""}`,
	);
	for (const c of checks) {
		const head = `${c.kind} ${c.name} (${c.address})`;
		if (c.ok) {
			ctx.out(`  ok    ${head}: ${c.detail ?? ""}`);
			for (const w of c.warnings ?? []) ctx.out(`        warning: ${w}`);
		} else {
			ctx.out(`  FAIL  ${head}: ${c.error?.code}: ${c.error?.message}`);
			if (c.error?.hint) ctx.out(`        hint: ${c.error.hint}`);
		}
	}
}

/** Every certificate a `directory` source would serve is checked; each skipped file becomes a problem. */
async function sourceProblems(config: Config): Promise<Array<{ path: string; message: string }>> {
	// Read-only: validating never locks or writes the state directory (only directory sources are loaded).
	const built = await buildSources(config.sources, {
		store: await openFileStore(config.state_dir, { readOnly: true }),
	});
	const { sources } = built;
	const signal = AbortSignal.timeout(60_000);
	const results = await Promise.all(sources.map((s) => s.load(signal))).finally(() => built.close());
	const files = results.flatMap((r, i) =>
		r.problems.map((p) => ({
			path: `sources[${config.sources.findIndex((c) => c.name === sources[i]?.name)}].path`,
			code: p.error.code,
			message: p.error.message,
			...(p.error.hint ? { hint: p.error.hint } : {}),
		})),
	);
	// Certificates named by source files can collide on one storage name too (the config's are checked already).
	const names = [
		...config.certificates.map((c) => c.name),
		...results.flatMap((r) => r.certificates.map((c) => c.name)),
	];
	const collisions = canonicalCollisions(names).map((c) => ({
		path: "certificates",
		message: `${c.names.map((n) => `"${n}"`).join(" and ")} all become ${c.ref} on HAProxy targets: rename all but one (a source file's name is its certificate's name)`,
	}));
	return [
		...files,
		...collisions,
		...trustProblems(
			config,
			results.flatMap((r) => r.certificates),
		).chains,
	];
}

/**
 * Each target's `trust_store` must load, and every certificate the sources hold now that the target carries must
 * verify against it (what sync would hold back). Issued certificates are checked by sync, as they are issued.
 */
function trustProblems(
	config: Config,
	certificates: ReadonlyArray<{ name: string; bundle: Parameters<typeof verifyBundle>[0] }>,
): { stores: ConfigProblem[]; chains: ConfigProblem[] } {
	const stores: ConfigProblem[] = [];
	const chains: ConfigProblem[] = [];
	config.certificates.forEach((c, i) => {
		if (c.trust_store === undefined) return;
		try {
			loadTrustStore(c.trust_store, `certificates[${i}].trust_store`);
		} catch (e) {
			if (!isCertificateeError(e)) throw e;
			stores.push({
				path: `certificates[${i}].trust_store`,
				code: e.code,
				message: e.message,
				...(e.hint ? { hint: e.hint } : {}),
			});
		}
	});
	config.targets.forEach((t, i) => {
		if (!("trust_store" in t) || t.trust_store === undefined) return;
		const path = `targets[${i}].trust_store`;
		let store: ReturnType<typeof loadTrustStore>;
		try {
			store = loadTrustStore(t.trust_store, path);
		} catch (e) {
			if (!isCertificateeError(e)) throw e;
			stores.push({ path, code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) });
			return;
		}
		const only = t.certificates;
		for (const c of certificates) {
			if (only !== undefined && !only.includes(c.name)) continue;
			const verdict = verifyBundle(c.bundle, store, new Date(), `certificate ${c.name}`);
			if (verdict.ok) continue;
			chains.push({
				path,
				code: verdict.code,
				message: `${verdict.message}: sync never pushes it to target ${t.name}`,
				hint: verdict.hint,
			});
		}
	});
	return { stores, chains };
}
