/**
 * The `haproxy-runtime` target: a HAProxy node reached through its runtime socket, with its certificate
 * files in crt_dir. observe() (observe.ts) reads both sides (files, HAProxy's in-memory store and crt-lists)
 * over one connection; apply() (apply.ts) performs one Action and reports it as a value; reload() (master.ts,
 * with master_cli) is the only way this target reloads HAProxy, asked for by the reload budget
 * (docs/reloads.md), never by a write. The client: socket.ts (operations), session.ts (connection), command.ts (requests and
 * answers), parse.ts (`show` answers), transaction.ts (whole certificate writes).
 */

import { isUnixSocket } from "../../base/address.js";
import { probeServed } from "../../probe/index.js";
import { fullPhase, type Place } from "../haproxy/engine/full-schedule.js";
import { type EndpointDriver, runtimeNameOf, storageDirName } from "../haproxy/engine/model.js";
import { applyRuntimeAction, applyRuntimeBatch, BATCHED_OPS } from "./apply.js";
import { type RuntimeContext, untouched } from "./context.js";
import { reloadThroughMaster } from "./master.js";
import { observeRuntime, workerInfo } from "./observe.js";
import type { RuntimeTargetConfig } from "./schema.js";
import { RuntimeClient } from "./socket.js";
import { settledWorker } from "./workers.js";

export { checkNameRemoval } from "../haproxy/guard.js";
export { type RuntimeTargetConfig, runtimeTargetSchema } from "./schema.js";
export { RuntimeClient, type RuntimeClientOptions, type WorkerIdentity } from "./socket.js";
export { abortOpenTransaction, addCertificate, type RuntimeWrite, updateCertificate } from "./transaction.js";

export interface RuntimeEndpointDeps {
	/** A client to share (tests, or one per node across targets); default: one made from the config. */
	client?: RuntimeClient;
	/** Probe handshake timeout. Default 5000 ms. */
	probeTimeoutMs?: number;
	/** The clock: observation times, and refusing expired or not-yet-valid certificates before sending. */
	now?: () => Date;
	/** plan and status: observe() does not remove leftover temp files (it reports them). */
	readOnly?: boolean;
	/** This node's place among the haproxy-runtime targets: where its full-observation schedule starts. */
	place?: Place;
}

/** The driver plus `close()`, which ends its socket connection. */
export type RuntimeEndpoint = EndpointDriver & { close(): Promise<void> };

export function createRuntimeEndpoint(
	config: RuntimeTargetConfig,
	deps: RuntimeEndpointDeps = {},
): RuntimeEndpoint {
	const client =
		deps.client ??
		new RuntimeClient({
			address: config.socket,
			master: config.master_socket,
			name: config.name,
			timeoutMs: config.timeout,
			bufsize: config.bufsize,
		});
	const dirName = storageDirName(config.crt_dir_name ?? config.crt_dir);
	const ctx: RuntimeContext = {
		config,
		client,
		dirName,
		runtimeName: (ref) => runtimeNameOf(dirName, ref),
		now: () => deps.now?.() ?? new Date(),
		readOnly: deps.readOnly === true,
		fileCache: new Map(),
		placementCache: new Map(),
		cfgCache: {},
		crtListFiles: [],
		touched: untouched(),
		fullPhase: fullPhase(deps.place, config.full_observation_every),
	};
	// The process tree is read where HAProxy's pids are this host's (a Unix socket), the master CLI included
	// (`master_socket`): from 3.0 the master, back from re-executing itself, still routes `@1` to the old worker
	// until the new one is ready (3.4.0: for 200 ms after forking it, with 30 files), so `@1 show info` alone
	// cannot tell a reload under way (targets/haproxy/process-tree.ts).
	const local = isUnixSocket(config.socket);
	const driver: RuntimeEndpoint = {
		name: config.name,
		reinserts: true,
		observe: (signal, look) => observeRuntime(ctx, signal, look),
		apply: (action, signal) => applyRuntimeAction(ctx, action, signal),
		applyBatch: (actions, signal) => applyRuntimeBatch(ctx, actions, signal),
		batches: BATCHED_OPS,
		worker: async () => workerInfo(await settledWorker(client, { local, timeoutMs: config.timeout })),
		close: () => client.close(),
	};
	const master = config.master_cli ?? (config.master_socket ? config.socket : undefined);
	if (master !== undefined) {
		driver.reload = () => {
			ctx.touched.all = true;
			return reloadThroughMaster({
				path: master,
				endpoint: config.name,
				timeoutMs: Math.max(30_000, config.timeout * 3),
				currentWorker: async () => (await client.checkWorker()).pid,
			});
		};
	}
	const probeAddress = config.probe;
	if (probeAddress !== undefined) {
		driver.probe = (sni, signal, keyType) =>
			probeServed({
				address: probeAddress,
				sni,
				signal,
				timeoutMs: deps.probeTimeoutMs ?? 5_000,
				...(keyType ? { keyType } : {}),
			});
	}
	return driver;
}
