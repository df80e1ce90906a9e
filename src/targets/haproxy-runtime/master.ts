/**
 * A reload through HAProxy's master CLI, verified. HAProxy 2.6 answers `reload` with nothing, so success is
 * read from `show proc`: the master's reload count goes up, and either its `[failed: N]` goes up (the new
 * configuration was refused; the old worker keeps serving) or a new worker is listed. 2.7 and later answer
 * once the reload is done, `Success=1` or `Success=0`, then `--` and the startup log (its ALERT lines say
 * why a configuration failed); `show proc` is read the same way after it. Then the stats socket must answer
 * from that new worker (docs/haproxy-runtime-target.md, "What certificatee does").
 */
import { createConnection } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { CertificateeError, describeError } from "../../errors.js";
import type { ReloadOutcome } from "../haproxy/engine/model.js";

export interface ProcList {
	/** Reloads the master has done (successful or not). */
	reloads: number;
	/** Reloads whose new configuration failed to load (`[failed: N]`; 0 when not printed). */
	failed: number;
	/** Workers, newest first as HAProxy lists them; `reloads` = reloads the worker survived (0: current). */
	workers: Array<{ pid: number; reloads: number }>;
}

/** `show proc` of the master CLI. Pure. */
export function parseShowProc(text: string): ProcList {
	const master = /^\s*\d+\s+master\s+(\d+)(?:\s+\[failed:\s*(\d+)\])?/m.exec(text);
	if (master === null) throw new Error(`not a "show proc" answer: ${text.slice(0, 80)}`);
	const workers = [...text.matchAll(/^\s*(\d+)\s+worker\s+(\d+)/gm)].map((m) => ({
		pid: Number(m[1]),
		reloads: Number(m[2]),
	}));
	return { reloads: Number(master[1]), failed: Number(master[2] ?? 0), workers };
}

/** What the master CLI's answer to `reload` says. Pure. */
export type ReloadAnswer =
	/** 2.6: an empty answer; `show proc` tells. */
	| { status: "unknown" }
	| { status: "loaded" }
	/** `Success=0`: the new configuration failed; `alerts` are the ALERT lines without their `[ALERT] (pid) :`. */
	| { status: "failed"; alerts: string[] };

export function readReloadAnswer(text: string): ReloadAnswer {
	const status = /^Success=([01])$/m.exec(text)?.[1];
	if (status === "1") return { status: "loaded" };
	if (status === undefined) return { status: "unknown" };
	const alerts = [...text.matchAll(/^\[ALERT\]\s+\(\d+\)\s*:\s*(.*)$/gm)].map((m) => m[1]!.trim());
	return { status: "failed", alerts };
}

/** One command on the master CLI (non-interactive: it answers once the client half-closes), answer to EOF. */
export function masterCommand(path: string, line: string, timeoutMs: number): Promise<string> {
	return new Promise((resolve, reject) => {
		const socket = createConnection(path.startsWith("unix@") ? path.slice(5) : path);
		let data = "";
		const timer = setTimeout(() => {
			socket.destroy();
			reject(new Error(`no answer to "${line}" within ${timeoutMs} ms`));
		}, timeoutMs);
		socket.on("connect", () => {
			socket.end(`${line}\n`);
		});
		socket.on("data", (chunk) => {
			data += chunk.toString("utf8");
		});
		socket.on("error", (e) => {
			clearTimeout(timer);
			reject(e);
		});
		socket.on("close", () => {
			clearTimeout(timer);
			resolve(data);
		});
	});
}

export interface MasterReloadOptions {
	/** The master CLI socket path. */
	path: string;
	endpoint: string;
	/** How long the new worker may take to answer (the whole reload). */
	timeoutMs: number;
	/** The pid of the worker answering on the stats socket now (a fresh `show info`). */
	currentWorker(): Promise<number>;
}

const POLL_MS = 100;

export async function reloadThroughMaster(o: MasterReloadOptions): Promise<ReloadOutcome> {
	const deadline = Date.now() + o.timeoutMs;
	let before: ProcList;
	try {
		before = parseShowProc(await masterCommand(o.path, "show proc", o.timeoutMs));
	} catch (e) {
		return reloadFailure(
			o,
			`the master CLI ${o.path} did not answer "show proc": ${describeError(e)}`,
			"check master_cli: HAProxy must run in master-worker mode with -S <path>, readable by certificatee",
			e,
		);
	}
	const was = before.workers.find((w) => w.reloads === 0)?.pid ?? before.workers[0]?.pid;
	const refused = await sendReload(o, was);
	if (refused) return refused;
	const after = await reloadReported(o, before, deadline);
	if (after === undefined) {
		return reloadFailure(
			o,
			`the master did not report the reload within ${o.timeoutMs} ms`,
			"check HAProxy's log and show proc on its master CLI",
		);
	}
	if (after.failed > before.failed) {
		return reloadFailure(
			o,
			`HAProxy failed to load its configuration on reload (show proc: failed ${after.failed}); worker ${was ?? "?"} keeps serving the old certificates`,
			"run haproxy -c on its configuration and fix it; see HAProxy's log",
		);
	}
	const fresh = after.workers.find((w) => w.reloads === 0 && w.pid !== was);
	if (fresh === undefined) {
		return reloadFailure(
			o,
			"the master reloaded but lists no new worker",
			"check HAProxy's log and show proc",
		);
	}
	if (await workerAnswers(o, fresh.pid, deadline)) {
		return {
			ok: true,
			...(was === undefined ? {} : { from: was }),
			to: fresh.pid,
			detail: `reloaded through the master CLI: worker ${was ?? "?"} -> ${fresh.pid}`,
		};
	}
	return reloadFailure(
		o,
		`new worker ${fresh.pid} did not answer on the stats socket within ${o.timeoutMs} ms`,
		"check HAProxy's log",
	);
}

function reloadFailure(
	o: MasterReloadOptions,
	message: string,
	hint: string,
	cause?: unknown,
): ReloadOutcome {
	return {
		ok: false,
		error: new CertificateeError("RELOAD_FAILED", `${o.endpoint}: ${message}`, {
			context: { endpoint: o.endpoint, file: o.path, operation: "reload" },
			hint,
			...(cause === undefined ? {} : { cause }),
		}),
	};
}

/** Sends `reload`; a failure when the master refused the connection or answered that the new configuration failed. */
async function sendReload(
	o: MasterReloadOptions,
	was: number | undefined,
): Promise<ReloadOutcome | undefined> {
	try {
		const answer = readReloadAnswer(await masterCommand(o.path, "reload", o.timeoutMs));
		if (answer.status === "failed") {
			return reloadFailure(
				o,
				`HAProxy failed to load its configuration on reload: ${answer.alerts[0] ?? "Success=0"}; worker ${was ?? "?"} keeps serving the old certificates`,
				"run haproxy -c on its configuration and fix it; see HAProxy's log",
			);
		}
	} catch (e) {
		// The master re-executes itself on reload and may drop the connection: only a refused connect is a failure.
		const code = (e as NodeJS.ErrnoException).code;
		if (code === "ENOENT" || code === "ECONNREFUSED" || code === "EACCES") {
			return reloadFailure(
				o,
				`could not send reload to the master CLI ${o.path}: ${describeError(e)}`,
				"check master_cli",
				e,
			);
		}
	}
	return undefined;
}

/** The master's process list once it counts more reloads than `before`; undefined if it does not by `deadline`. */
async function reloadReported(
	o: MasterReloadOptions,
	before: ProcList,
	deadline: number,
): Promise<ProcList | undefined> {
	while (Date.now() < deadline) {
		const after = await masterCommand(o.path, "show proc", o.timeoutMs).then(parseShowProc, () => undefined);
		if (after !== undefined && after.reloads > before.reloads) return after;
		await sleep(POLL_MS);
	}
	return undefined;
}

/** The stats socket must answer from the new worker before anything is observed or probed. */
async function workerAnswers(o: MasterReloadOptions, pid: number, deadline: number): Promise<boolean> {
	while (Date.now() < deadline) {
		if ((await o.currentWorker().catch(() => undefined)) === pid) return true;
		await sleep(POLL_MS);
	}
	return false;
}
