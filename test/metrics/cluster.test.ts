import { describe, expect, it } from "vitest";
import type { ClusterView } from "../../src/metrics/cluster.js";
import { createMetrics } from "../../src/metrics/index.js";
import { parseScrape } from "../harness/scrape.js";

const view: ClusterView = {
	member: "lb-ctl-1",
	leader: "lb-ctl-1",
	isLeader: true,
	members: ["lb-ctl-1", "lb-ctl-2", "lb-ctl-3"],
	leaseRemainingSeconds: 7.5,
	watchLagSeconds: 0.25,
	fencedWrites: 0,
	shardEndpoints: false,
};

const scrape = async (metrics: ReturnType<typeof createMetrics>) =>
	parseScrape(await metrics.registry.metrics());

describe("cluster metrics (docs/cluster.md)", () => {
	it("are absent outside a cluster", async () => {
		const samples = await scrape(createMetrics());
		expect([...samples.keys()].filter((k) => k.startsWith("certificatee_cluster_"))).toEqual([]);
	});

	it("read the replica's view at scrape time; fenced writes only ever count up", async () => {
		const metrics = createMetrics();
		let current: ClusterView = view;
		metrics.recordCluster(() => current);
		let samples = await scrape(metrics);
		expect(samples.get("certificatee_cluster_leader")).toBe(1);
		expect(samples.get("certificatee_cluster_members")).toBe(3);
		expect(samples.get("certificatee_cluster_lease_remaining_seconds")).toBe(7.5);
		expect(samples.get("certificatee_cluster_watch_lag_seconds")).toBe(0.25);
		expect(samples.get("certificatee_cluster_fenced_writes_total")).toBe(0);
		current = { ...view, isLeader: false, leader: "lb-ctl-2", fencedWrites: 4, leaseRemainingSeconds: 0 };
		samples = await scrape(metrics);
		expect(samples.get("certificatee_cluster_leader")).toBe(0);
		expect(samples.get("certificatee_cluster_fenced_writes_total")).toBe(4);
		// A rebuilt engine (SIGHUP) starts its own count from 0: the counter keeps what it had.
		current = { ...current, fencedWrites: 1 };
		metrics.recordCluster(() => current);
		samples = await scrape(metrics);
		expect(samples.get("certificatee_cluster_fenced_writes_total")).toBe(4);
		current = { ...current, fencedWrites: 3 };
		samples = await scrape(metrics);
		expect(samples.get("certificatee_cluster_fenced_writes_total")).toBe(6);
	});
});
