/**
 * The write-queue registry on its own: which endpoints are one HAProxy process (same normalised address,
 * or the same observed worker), and that one process never runs two writes at once.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
	apiKey,
	createWriteQueues,
	sameWorker,
	socketKey,
	type WriteQueue,
	workerFromInfo,
} from "../../../../src/targets/haproxy/engine/writers.js";

/** Runs `n` writes of `ms` each on every queue at once; returns the largest number running together. */
async function overlap(queues: WriteQueue[], n = 3, ms = 15): Promise<number> {
	let running = 0;
	let most = 0;
	const write = async () => {
		running += 1;
		most = Math.max(most, running);
		await sleep(ms);
		running -= 1;
	};
	await Promise.all(queues.flatMap((q) => Array.from({ length: n }, () => q.run(write))));
	return most;
}

describe("write queues: one writer per HAProxy process", () => {
	it.each([
		["/run/haproxy/admin.sock", "unix@/run/haproxy//./admin.sock"],
		["/run/haproxy/admin.sock", "/run/haproxy/x/../admin.sock"],
		["127.0.0.1:9999", "127.0.0.1:9999"],
	])("socket addresses %s and %s are one key", (a, b) => {
		expect(socketKey(a)).toBe(socketKey(b));
	});

	it.each([
		["http://LB1:5555/v3/", "http://lb1:5555/v3"],
		["https://lb1:443/v3", "https://lb1/v3"],
	])("API URLs %s and %s are one key", (a, b) => {
		expect(apiKey(a)).toBe(apiKey(b));
	});

	it("different sockets, and a socket and an API URL, are different keys", () => {
		expect(socketKey("/run/a.sock")).not.toBe(socketKey("/run/b.sock"));
		expect(socketKey("lb1:5555")).not.toBe(apiKey("http://lb1:5555"));
	});

	it("writes to one address run one at a time, across every holder of the registry's queue", async () => {
		const queues = createWriteQueues();
		const a = queues.queueFor({ address: socketKey("/run/admin.sock") });
		const b = queues.queueFor({ address: socketKey("unix@/run/admin.sock") });
		expect(await overlap([a, b])).toBe(1);
	});

	it("writes to different processes run side by side", async () => {
		const queues = createWriteQueues();
		const a = queues.queueFor({ address: socketKey("/run/a.sock") });
		const b = queues.queueFor({ address: socketKey("/run/b.sock") });
		expect(await overlap([a, b])).toBe(2);
	});

	it("two addresses of one process share a queue once the same worker answered on both", async () => {
		const queues = createWriteQueues();
		const observedAt = new Date("2026-12-01T07:00:00Z");
		const worker = workerFromInfo({ pid: "4242", uptime_sec: "100", node: "lb1" }, observedAt);
		// The same worker seen two seconds later through the Data Plane API: same start, give or take a second.
		const sameLater = workerFromInfo(
			{ pid: "4242", uptime_sec: "101", node: "lb1" },
			new Date(observedAt.getTime() + 2_000),
		);
		if (!worker || !sameLater) throw new Error("no worker identity");
		const socket = queues.queueFor({ address: socketKey("/run/admin.sock"), worker });
		const api = queues.queueFor({ address: apiKey("http://127.0.0.1:5555/v3"), worker: sameLater });
		expect(await overlap([socket, api])).toBe(1);
		// The join outlives the observation: the API address alone now finds the shared queue.
		const again = queues.queueFor({ address: apiKey("http://127.0.0.1:5555/v3") });
		expect(await overlap([socket, again])).toBe(1);
	});

	it("a join waits for writes already queued on either side", async () => {
		const queues = createWriteQueues();
		const a = queues.queueFor({ address: "socket:/a" });
		const b = queues.queueFor({ address: "socket:/b" });
		const order: string[] = [];
		const slow = a.run(async () => {
			await sleep(30);
			order.push("a1");
		});
		const worker = { pid: 7, startedAt: 0 };
		queues.queueFor({ address: "socket:/a", worker });
		const joined = queues.queueFor({ address: "socket:/b", worker });
		await Promise.all([slow, joined.run(async () => order.push("b1")), b.run(async () => order.push("b2"))]);
		expect(order).toEqual(["a1", "b1", "b2"]);
	});

	it("a failed write does not stop the queue", async () => {
		const q = createWriteQueues().queueFor({ address: "socket:/a" });
		await expect(q.run(async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
		expect(await q.run(async () => "next")).toBe("next");
	});

	it("a reload is a new worker: another pid, or the same pid on another node", () => {
		const w = { node: "lb1", pid: 10, startedAt: 1_000_000 };
		expect(sameWorker(w, { ...w, startedAt: w.startedAt + 1_000 })).toBe(true);
		expect(sameWorker(w, { ...w, pid: 11 })).toBe(false);
		expect(sameWorker(w, { ...w, node: "lb2" })).toBe(false);
		expect(workerFromInfo({ api_version: "v3" }, new Date())).toBeUndefined();
	});
});
