/**
 * HTTP-01 across a fleet (`http01: { via: haproxy-map }`): each token goes into the HAProxy map of every
 * node of the named targets, and every node must answer it over plain HTTP before the CA is asked, so the CA
 * may reach any node. Tokens are removed afterwards, also after failures; entries left by an earlier run
 * (a crash, a kill) are cleared at start (prepare) and in any case before this process publishes its first
 * token. Nothing reaches the disk.
 */
import { isIPv6 } from "node:net";
import { request } from "undici";
import { CertificateeError, describeError } from "../../errors.js";
import type { ChallengeMapNode } from "../../targets/haproxy/challenge-map.js";
import type { Http01Responder } from "./http01.js";

export interface Http01MapOptions {
	issuer: string;
	map: string;
	targets: readonly string[];
	/** Builds the nodes; called at the first challenge, never for an issuer that orders nothing. */
	nodes: () => ChallengeMapNode[];
	verifyTimeoutMs: number;
	logger: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
}

export type Http01MapResponder = Http01Responder & { close(): Promise<void> };

interface NodeFailure {
	node: string;
	why: string;
}

/** GET http://<node>/.well-known/acme-challenge/<token> with the name's Host header; undefined when it answers right. */
async function checkAnswer(
	node: ChallengeMapNode,
	token: string,
	keyAuthorization: string,
	domain: string,
	signal: AbortSignal,
): Promise<string | undefined> {
	try {
		const res = await request(`http://${node.httpAddress}/.well-known/acme-challenge/${token}`, {
			// An IPv6 address goes in brackets (RFC 7230 §5.4), as the CA's validation request sends it.
			headers: { host: isIPv6(domain) ? `[${domain}]` : domain },
			signal,
		});
		const body = await res.body.text();
		if (res.statusCode !== 200) return `GET on ${node.httpAddress} answered HTTP ${res.statusCode}`;
		if (body.trim() !== keyAuthorization)
			return `GET on ${node.httpAddress} answered something else (${body.length} bytes): is the map rule in haproxy.cfg?`;
		return undefined;
	} catch (e) {
		const code = (e as { code?: string }).code;
		return `GET on ${node.httpAddress} failed: ${signal.aborted ? "no answer in time" : (code ?? describeError(e))}`;
	}
}

export function createHttp01MapResponder(options: Http01MapOptions): Http01MapResponder {
	const { map, logger } = options;
	const address = `haproxy-map ${map} on ${options.targets.join(", ")}`;
	// Connections to the nodes are held only while a token is out, like the built-in responder's port.
	let nodes: ChallengeMapNode[] | undefined;
	let outstanding = 0;
	// Stale entries are cleared once per process, by the first challenge; a failed clear is tried again.
	let cleared: Promise<void> | undefined;

	const fleet = (): ChallengeMapNode[] => {
		nodes ??= options.nodes();
		return nodes;
	};

	const clearStale = (signal: AbortSignal): Promise<void> => {
		cleared ??= (async () => {
			const all = fleet();
			const failures = await each(all, (n) => n.clear(signal));
			if (failures.length > 0)
				throw fleetError("cannot clear stale tokens", failures, "the CA was not asked");
			logger.info(
				{ issuer: options.issuer, map, nodes: all.map((n) => n.name) },
				"HTTP-01 map cleared of stale tokens on every node",
			);
		})().catch((e: unknown) => {
			cleared = undefined;
			throw e;
		});
		return cleared;
	};

	const removeEverywhere = async (token: string): Promise<NodeFailure[]> => {
		// Removal runs even after the order was cancelled, bounded per node.
		const signal = AbortSignal.timeout(Math.max(options.verifyTimeoutMs, 10_000));
		return each(fleet(), (n) => n.remove(token, signal));
	};

	const release = async (): Promise<void> => {
		outstanding -= 1;
		if (outstanding > 0 || nodes === undefined) return;
		const open = nodes;
		nodes = undefined;
		await Promise.allSettled(open.map((n) => n.close()));
	};

	const fleetError = (what: string, failures: NodeFailure[], tail: string) =>
		new CertificateeError(
			"ISSUE_FAILED",
			`HTTP-01 through ${address}: ${what}: ${failures.map((f) => `${f.node}: ${f.why}`).join("; ")}; ${tail}`,
			{
				context: { endpoint: failures.map((f) => f.node).join(", "), field: "http01", file: map },
				hint: 'every node must be reachable and answer the token on its http_address with the rule of README "Challenges across a fleet"',
				retryable: true,
			},
		);

	/** Sets the token on every node and checks every node answers it; on any failure removes it everywhere. */
	const publishEverywhere = async (
		token: string,
		keyAuthorization: string,
		domain: string,
		signal: AbortSignal,
	): Promise<void> => {
		await clearStale(signal);
		const all = fleet();
		const failed = await each(all, (n) => n.set(token, keyAuthorization, signal));
		if (failed.length === 0) {
			const verify = AbortSignal.any([signal, AbortSignal.timeout(options.verifyTimeoutMs)]);
			const answers = await Promise.all(
				all.map(async (n) => {
					const why = await checkAnswer(n, token, keyAuthorization, domain, verify);
					return why === undefined ? [] : [{ node: n.name, why }];
				}),
			);
			failed.push(...answers.flat());
		}
		if (failed.length === 0) return;
		for (const f of await removeEverywhere(token))
			logger.warn({ issuer: options.issuer, node: f.node, err: f.why }, "HTTP-01 token removal failed");
		throw fleetError(`not every node answers the token for ${domain}`, failed, "the CA was not asked");
	};

	return {
		address,
		via: "haproxy-map",
		async publish(token, keyAuthorization, domain, signal) {
			outstanding += 1;
			try {
				await publishEverywhere(token, keyAuthorization, domain, signal);
			} catch (e) {
				await release();
				throw e;
			}
			let removed = false;
			return async () => {
				if (removed) return;
				removed = true;
				const failures = await removeEverywhere(token).finally(release);
				if (failures.length > 0)
					throw fleetError("token removal failed", failures, "it is cleared at the next start");
			};
		},
		async prepare(signal) {
			outstanding += 1;
			try {
				await clearStale(signal);
			} finally {
				await release();
			}
		},
		async close() {
			const open = nodes ?? [];
			nodes = undefined;
			await Promise.allSettled(open.map((n) => n.close()));
		},
	};
}

/** Runs `step` on every node at once; returns the nodes where it failed, with why. */
async function each(
	nodes: readonly ChallengeMapNode[],
	step: (node: ChallengeMapNode) => Promise<void>,
): Promise<NodeFailure[]> {
	const outcomes = await Promise.allSettled(nodes.map(step));
	return outcomes.flatMap((o, i) =>
		o.status === "rejected" ? [{ node: nodes[i]!.name, why: describeError(o.reason) }] : [],
	);
}
