/**
 * The `cluster:` block: several certificatee members sharing their state through etcd (docs/cluster.md). Without
 * it nothing changes. `password_file` and `${ENV}` are resolved before this schema sees values.
 */
import { hostname } from "node:os";
import { z } from "zod";
import { duration } from "../base/duration.js";
import type { EtcdSettings } from "./etcd.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export const DEFAULT_PREFIX = "certificatee/";
export const MIN_LEASE_TTL_MS = 2000;

/** A member's default name: unique per process on a host, readable in `status`. */
export function defaultMemberName(): string {
	const host =
		hostname()
			.replace(/[^A-Za-z0-9._-]/g, "-")
			.replace(/^[^A-Za-z0-9]+/, "") || "member";
	return `${host}-${process.pid}`;
}

export const etcdSchema = z
	.strictObject({
		endpoints: z
			.array(z.url({ protocol: /^https?$/, error: "expected an http(s) URL, e.g. https://etcd-1:2379" }))
			.min(1),
		/** Every key under it; several installations can share one etcd. */
		prefix: z
			.string()
			.regex(/^([A-Za-z0-9._-]+\/)+$/, 'expected path segments ending in "/", e.g. "certificatee/"')
			.default(DEFAULT_PREFIX),
		/** PEM bundle of the CAs that sign etcd's certificates. */
		ca_file: z.string().min(1).optional(),
		/** Client certificate and its key, for etcd's --client-cert-auth. */
		cert_file: z.string().min(1).optional(),
		key_file: z.string().min(1).optional(),
		username: z.string().min(1).optional(),
		password: z.string().min(1).optional(),
		/** Deadline of each etcd request. */
		deadline: duration.pipe(z.number().min(100, { error: "deadline must be at least 100ms" })).prefault("2s"),
	})
	.refine((e) => (e.cert_file === undefined) === (e.key_file === undefined), {
		message: "give both cert_file and key_file (a client certificate), or neither",
		path: ["key_file"],
	})
	.refine((e) => (e.username === undefined) === (e.password === undefined), {
		message: "give both username and password (or password_file), or neither",
		path: ["password"],
	});

export const clusterSchema = z.strictObject({
	etcd: etcdSchema,
	/** TTL of the member's etcd lease: how long a dead leader keeps its leadership at most. Whole seconds. */
	lease_ttl: duration
		.pipe(
			z
				.number()
				.min(MIN_LEASE_TTL_MS, { error: "lease_ttl must be at least 2s" })
				.refine((ms) => ms % 1000 === 0, { error: "lease_ttl must be whole seconds (etcd leases are)" }),
		)
		.prefault("10s"),
	/** This member's name in etcd (leader, members, locks); unique among the members. */
	member: z
		.string()
		.regex(NAME, "expected letters, digits, '.', '_' or '-', e.g. lb-ctl-1")
		.default(defaultMemberName),
	/** Endpoints assigned to live members by rendezvous hashing, instead of every member pushing every endpoint. */
	shard_endpoints: z.boolean().default(false),
	/** 32 random bytes, base64 or hex, the same on every member; else CERTIFICATEE_ENCRYPTION_KEY. */
	encryption_key_file: z.string().min(1).optional(),
});
export type ClusterConfig = z.output<typeof clusterSchema>;

/** The connection settings (etcd.ts) of a parsed `cluster:` block. */
export function etcdSettings(cluster: ClusterConfig): EtcdSettings {
	const { deadline, ...etcd } = cluster.etcd;
	return { ...etcd, deadline_ms: deadline };
}
