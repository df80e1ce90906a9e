/** The configuration file's schema: the top level here, each kind's options in its own folder. */
import { isIP } from "node:net";
import { z } from "zod";
import { duration } from "../base/duration.js";
import { trustStoreSchema } from "../certificates/trust.js";
import { clusterSchema } from "../cluster/schema.js";
import { certificateSpecSchema, renewalSettingsSchema } from "../renewal/schema.js";
import { issuerTypes, sourceKind, sourceSchema } from "../sources/kinds.js";
import { canonicalCollisions } from "../targets/haproxy/naming.js";
import { targetKind, targetKinds, targetSchema } from "../targets/kinds.js";

// Each kind's schema, role and what the rules below ask of it are in its folder's kind.ts (issue 22).
export { type SourceConfig, sourceSchema } from "../sources/kinds.js";
export { type TargetConfig, targetSchema } from "../targets/kinds.js";

const listen = z.string().regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, {
	error: "expected host:port, e.g. 127.0.0.1:9810",
});

/** `rollout`: canaries first (docs/rollouts.md). */
export const rolloutSchema = z.strictObject({
	/** Canary endpoints: a count, or "P%" of the rollout's endpoints (rounded up, at least 1). */
	canary: z.union([
		z.number().int().min(1),
		z
			.string()
			.regex(/^\d{1,3}(\.\d+)?%$/, { message: 'canary is a count (1) or a percentage ("10%")' })
			.refine((p) => Number.parseFloat(p) > 0 && Number.parseFloat(p) <= 100, {
				message: "canary percentage must be above 0% and at most 100%",
			}),
	]),
	/** What a canary must show before the rest: default serial, chain, key-types, and trust when a trust store is set. */
	verify: z
		.array(z.enum(["serial", "chain", "key-types", "trust"]))
		.min(1)
		.optional(),
	/** How long the canaries serve the new certificate, verified, before the rest get it. */
	hold: duration.prefault("0s"),
	/** The trust check's store (a PEM bundle or system); default: each target's trust_store. */
	trust_store: trustStoreSchema,
	/** HAProxy targets taking part (default: all); a fleet of haproxy-runtime nodes is one rollout across them. */
	targets: z.array(z.string().min(1)).min(1).optional(),
	/** Certificates rolled out this way (default: all). */
	certificates: z.array(z.string().min(1)).min(1).optional(),
});
export type RolloutConfig = z.infer<typeof rolloutSchema>;

export const configSchema = z.strictObject({
	state_dir: z.string().min(1).default("./.certificatee"),
	interval: duration.prefault("10m"),
	listen: listen.default("127.0.0.1:9810"),
	/** From `listen_token_file` (or `${ENV}`): the page, /status.json and /metrics need it; the probes do not. */
	listen_token: z
		.string()
		.min(16, { error: "listen_token must be at least 16 characters (e.g. openssl rand -hex 32)" })
		.optional(),
	log_level: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
	sources: z.array(sourceSchema).default([]),
	certificates: z.array(certificateSpecSchema).default([]),
	renewal: renewalSettingsSchema.prefault({}),
	targets: z.array(targetSchema).default([]),
	/** Several members sharing state through etcd (docs/cluster.md); absent: one process, state in state_dir. */
	cluster: clusterSchema.optional(),
	/** Canary rollouts across the HAProxy targets (docs/rollouts.md); absent: every endpoint at once. */
	rollout: rolloutSchema.optional(),
});
export type Config = z.infer<typeof configSchema>;

interface Problem {
	path: string;
	message: string;
}
type Named = {
	name?: unknown;
	type?: unknown;
	issuer?: unknown;
	issuers?: unknown;
	endpoints?: unknown;
	domains?: unknown;
	dns_hook?: unknown;
	http01?: unknown;
	http_address?: unknown;
	dns01?: unknown;
	profile?: unknown;
};

function list(value: unknown): Named[] {
	return Array.isArray(value) ? value.filter((v): v is Named => v !== null && typeof v === "object") : [];
}

/**
 * Rules across entries (unique names, issuers that exist). Runs on the raw tree even when the schema
 * fails elsewhere, so `validate` lists every mistake at once.
 */
export function referenceProblems(raw: unknown): Problem[] {
	const top = (raw ?? {}) as Record<string, unknown>;
	const problems: Problem[] = [];
	const sources = list(top.sources);
	unique(sources, "sources", problems);
	unique(list(top.certificates), "certificates", problems);
	sameStorageName(list(top.certificates), problems);
	unique(list(top.targets), "targets", problems);
	list(top.targets).forEach((t, i) => {
		unique(list(t.endpoints), `targets[${i}].endpoints`, problems);
	});
	http01MapTargets(sources, list(top.targets), problems);
	rolloutTargets(top.rollout, list(top.targets), problems);
	const issuers = sources.filter((s) => issuerTypes.includes(String(s.type))).map((s) => s.name);
	list(top.certificates).forEach((c, i) => {
		wildcardWithoutDns01(c, i, sources, problems);
		ipWithoutHttp01(c, i, sources, problems);
		profileOfNonAcme(c, i, sources, problems);
		const named = [
			...(typeof c.issuer === "string" ? [{ path: `certificates[${i}].issuer`, name: c.issuer }] : []),
			...(Array.isArray(c.issuers) ? (c.issuers as unknown[]) : []).map((n, j) => ({
				path: `certificates[${i}].issuers[${j}]`,
				name: n,
			})),
		];
		for (const { path, name } of named) {
			if (typeof name !== "string" || issuers.includes(name)) continue;
			problems.push({
				path,
				message: `no issuer source named "${name}" (issuers: ${issuers.join(", ") || "none"}; an issuer is a source of type ${issuerTypes.join(" or ")})`,
			});
		}
	});
	return problems;
}

/** `rollout.targets` names targets whose kind takes part in rollouts (a directory target has no endpoints to stage). */
function rolloutTargets(rollout: unknown, targets: Named[], problems: Problem[]): void {
	const named = (rollout as { targets?: unknown } | undefined)?.targets;
	if (!Array.isArray(named)) return;
	const kinds = targetKinds.filter((k) => k.rollout).map((k) => k.type);
	named.forEach((name: unknown, i) => {
		const t = targets.find((x) => x.name === name);
		if (targetKind(t?.type)?.rollout) return;
		const taking = targets.filter((x) => targetKind(x.type)?.rollout);
		problems.push({
			path: `rollout.targets[${i}]`,
			message: `"${String(name)}" is ${t ? `a ${String(t.type)} target` : "no target"}: a rollout spans ${kinds.join(" and ")} targets (${taking.map((x) => String(x.name)).join(", ") || "none configured"})`,
		});
	});
}

/**
 * `http01: { via: haproxy-map }` names HAProxy targets whose every node says where it serves port 80; two
 * issuers may not share one map on one target (each clears the map's stale tokens at its first challenge).
 */
function http01MapTargets(sources: Named[], targets: Named[], problems: Problem[]): void {
	const claimed = new Map<string, number>();
	const holders = targetKinds.filter((k) => k.challengeMaps).map((k) => k.type);
	sources.forEach((s, i) => {
		const maps = sourceKind(s.type)?.challengeMaps?.(s);
		if (!maps) return;
		maps.targets.forEach((name: unknown, j) => {
			const path = `sources[${i}].${maps.field}[${j}]`;
			const t = targets.find((x) => x.name === name);
			const holds = targetKind(t?.type)?.challengeMaps;
			if (!t || !holds) {
				const named = targets.filter((x) => targetKind(x.type)?.challengeMaps);
				problems.push({
					path,
					message: `"${String(name)}" is ${t ? `a ${String(t.type)} target` : "no target"}: name ${holders.join(" or ")} targets (${named.map((x) => String(x.name)).join(", ") || "none configured"})`,
				});
				return;
			}
			const at = targets.indexOf(t);
			for (const p of holds.unaddressed(t, String(name), path))
				problems.push({ path: `targets[${at}].${p.field}`, message: p.message });
			const key = `${String(name)}\n${String(maps.map)}`;
			const other = claimed.get(key);
			if (other !== undefined && other !== i)
				problems.push({
					path,
					message: `sources[${other}] already uses map ${String(maps.map)} on target "${String(name)}": give each issuer its own map`,
				});
			else claimed.set(key, i);
		});
	});
}

/** A wildcard name is proven only over DNS-01: an issuer that cannot (ACME without dns_hook or dns01) fails every order of it. */
function wildcardWithoutDns01(c: Named, i: number, sources: Named[], problems: Problem[]): void {
	if (!Array.isArray(c.domains)) return;
	const names = [c.issuer, ...(Array.isArray(c.issuers) ? (c.issuers as unknown[]) : [])];
	for (const name of names) {
		const issuer = sources.find((s) => s.name === name);
		if (!issuer) continue;
		const at = sources.indexOf(issuer);
		const lacking = sourceKind(issuer.type)?.proofs?.(issuer, `sources[${at}]`).wildcard;
		if (lacking === undefined) continue;
		c.domains.forEach((d, j) => {
			if (typeof d === "string" && d.startsWith("*.")) {
				problems.push({
					path: `certificates[${i}].domains[${j}]`,
					message: `wildcard "${d}" needs DNS-01, and issuer "${String(name)}" ${lacking}`,
				});
			}
		});
	}
}

function issuersOf(c: Named, sources: Named[]): Named[] {
	const names = [c.issuer, ...(Array.isArray(c.issuers) ? (c.issuers as unknown[]) : [])];
	return sources.filter((s) => names.includes(s.name));
}

/**
 * RFC 8738 §7: an IP address is validated over HTTP-01 (or TLS-ALPN-01), never DNS-01. An issuer that
 * answers only DNS-01 (ACME with dns01 or dns_hook, no http01) would fail every order of it.
 */
function ipWithoutHttp01(c: Named, i: number, sources: Named[], problems: Problem[]): void {
	if (!Array.isArray(c.domains)) return;
	for (const issuer of issuersOf(c, sources)) {
		const at = sources.indexOf(issuer);
		const lacking = sourceKind(issuer.type)?.proofs?.(issuer, `sources[${at}]`).ip;
		if (lacking === undefined) continue;
		c.domains.forEach((d, j) => {
			if (typeof d === "string" && isIP(d) !== 0) {
				problems.push({
					path: `certificates[${i}].domains[${j}]`,
					message: `IP address "${d}" can only be validated over HTTP-01 (RFC 8738: no DNS-01 for IP addresses), and issuer "${String(issuer.name)}" ${lacking}`,
				});
			}
		});
	}
}

/** `profile` is a CA profile of the order (ACME): an issuer without them (a local CA) would silently ignore it. */
function profileOfNonAcme(c: Named, i: number, sources: Named[], problems: Problem[]): void {
	if (c.profile === undefined) return;
	for (const issuer of issuersOf(c, sources)) {
		if (sourceKind(issuer.type)?.profiles) continue;
		problems.push({
			path: `certificates[${i}].profile`,
			message: `profile is an ACME profile, and issuer "${String(issuer.name)}" is of type ${String(issuer.type)}: remove profile, or set it on the ACME issuers instead (sources[].profile)`,
		});
	}
}

/**
 * Two certificates whose names sanitise to one storage name (`example.com` and `example_com` both give
 * `example_com.pem`) would overwrite each other's file on every HAProxy target, every cycle.
 */
function sameStorageName(certificates: Named[], problems: Problem[]): void {
	const index = (name: string | undefined) => certificates.findIndex((c) => c.name === name);
	const names = certificates.flatMap((c) => (typeof c.name === "string" && c.name !== "" ? [c.name] : []));
	for (const {
		ref,
		names: [first, ...others],
	} of canonicalCollisions(names)) {
		for (const other of others) {
			problems.push({
				path: `certificates[${index(other)}].name`,
				message: `"${other}" and "${first}" (certificates[${index(first)}]) both become ${ref} on HAProxy targets (the Data Plane API sanitises names): rename one`,
			});
		}
	}
}

function unique(items: Named[], what: string, problems: Problem[]): void {
	const seen = new Map<unknown, number>();
	items.forEach((item, i) => {
		const first = seen.get(item.name);
		if (first !== undefined) {
			problems.push({
				path: `${what}[${i}].name`,
				message: `duplicate name "${String(item.name)}" (also ${what}[${first}])`,
			});
		} else seen.set(item.name, i);
	});
}
