import { describe, expect, it } from "vitest";
import { batchGroups } from "../../../../src/targets/haproxy/engine/batches.js";
import type { HaproxyAction } from "../../../../src/targets/haproxy/engine/model.js";

const step = (op: HaproxyAction["op"], ref: string) => ({ action: { op, ref } as unknown as HaproxyAction });
const BATCHED = new Set<HaproxyAction["op"]>(["storage-create", "storage-replace", "runtime-set"]);

describe("batchGroups", () => {
	it("without batching: every step alone, in plan order", () => {
		const steps = [step("storage-replace", "a"), step("runtime-set", "a"), step("storage-replace", "b")];
		expect(batchGroups(steps, undefined)).toEqual([[0], [1], [2]]);
		expect(batchGroups(steps, new Set())).toEqual([[0], [1], [2]]);
	});

	it("storage writes first, all together; then runs of one op on distinct refs, in plan order", () => {
		const steps = [
			step("storage-replace", "a"), // 0
			step("runtime-set", "a"), // 1
			step("storage-create", "b"), // 2
			step("crt-list-file-add", "b"), // 3
			step("runtime-add", "b"), // 4
			step("storage-replace", "c"), // 5
			step("runtime-set", "c"), // 6
			step("storage-replace", "d"), // 7
			step("runtime-set", "d"), // 8
			step("runtime-reinsert", "e"), // 9
			step("runtime-set", "f"), // 10
		];
		expect(batchGroups(steps, BATCHED)).toEqual([[0, 2, 5, 7], [1], [3], [4], [6, 8], [9], [10]]);
	});

	it("never moves a storage write ahead of an earlier step of its own ref, nor batches one ref twice", () => {
		const steps = [
			step("runtime-set", "a"), // 0
			step("storage-replace", "a"), // 1: after a's runtime write: stays in place
			step("storage-replace", "b"), // 2
			step("runtime-set", "c"), // 3
			step("runtime-set", "c"), // 4: the same ref again: a new group
		];
		expect(batchGroups(steps, BATCHED)).toEqual([[2], [0], [1], [3], [4]]);
	});

	it("ops the driver does not batch stay one at a time", () => {
		const steps = [
			step("storage-replace", "a"),
			step("storage-replace", "b"),
			step("runtime-set", "a"),
			step("runtime-set", "b"),
		];
		expect(batchGroups(steps, new Set(["runtime-set"]))).toEqual([[0], [1], [2, 3]]);
	});
});
