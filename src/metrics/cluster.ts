/**
 * What a replica knows of its cluster (docs/cluster.md), as data for metrics, `status` and the fleet page.
 * The daemon builds it from the live session, leadership and membership; pure from here on.
 */
import { Counter, Gauge, type Registry } from "prom-client";

export interface ClusterView {
	/** This replica's name (`cluster.member`). */
	member: string;
	/** The member that leads now, as last seen; absent while nobody does (or etcd cannot be read). */
	leader?: string;
	isLeader: boolean;
	/** Live members, sorted. */
	members: string[];
	/** Seconds this replica may still act on its lease (its own deadline, not etcd's); 0 when it holds none. */
	leaseRemainingSeconds: number;
	/** Seconds since a change under the watched prefix was written and this replica saw it (0 when idle). */
	watchLagSeconds: number;
	/** Writes etcd refused because this replica no longer held the leadership or shard it wrote under. */
	fencedWrites: number;
	shardEndpoints: boolean;
	/** With shard_endpoints: who pushes each HAProxy endpoint. */
	owners?: Array<{ target: string; endpoint: string; owner?: string }>;
}

/** The cluster gauges, read from `view()` at scrape time; nothing is registered outside a cluster. */
export function registerClusterMetrics(registry: Registry, view: () => ClusterView | undefined): void {
	const gauge = (name: string, help: string, value: (v: ClusterView) => number) =>
		new Gauge({
			name,
			help,
			registers: [registry],
			collect() {
				const v = view();
				this.reset();
				if (v) this.set(value(v));
			},
		});
	gauge("certificatee_cluster_leader", "1 on the replica that leads (orders and renews), else 0.", (v) =>
		v.isLeader ? 1 : 0,
	);
	gauge("certificatee_cluster_members", "Live members this replica sees in etcd.", (v) => v.members.length);
	gauge(
		"certificatee_cluster_lease_remaining_seconds",
		"Seconds this replica may still act on its lease (its own deadline: last acknowledged keepalive + TTL - margin).",
		(v) => v.leaseRemainingSeconds,
	);
	gauge(
		"certificatee_cluster_watch_lag_seconds",
		"Seconds between a change in etcd and this replica seeing it through its watch (0 when idle).",
		(v) => v.watchLagSeconds,
	);
	let counted = 0;
	new Counter({
		name: "certificatee_cluster_fenced_writes_total",
		help: "Writes etcd refused because this replica no longer held the leadership or shard it wrote under.",
		registers: [registry],
		collect() {
			const now = view()?.fencedWrites ?? counted;
			if (now > counted) this.inc(now - counted);
			counted = now;
		},
	});
}
