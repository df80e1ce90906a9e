/**
 * The order in which an endpoint's planned steps run when its driver batches some ops. Pure.
 *
 * Storage writes go first, all together: a ref's storage write is its first step (storage before runtime, so a
 * later reload never brings back old content), and a storage write moved ahead of other refs' steps only makes
 * a reload load the new file sooner. So every file is durable before the first runtime commit, and a driver
 * can write and fsync them together (one directory fsync). The other steps keep their order; a run of
 * consecutive steps of one batched op on distinct refs forms one group (runtime sets: back to back, in order).
 */
import type { HaproxyAction } from "./model.js";

const STORAGE_WRITES: ReadonlySet<HaproxyAction["op"]> = new Set(["storage-create", "storage-replace"]);

/** Groups of step indexes, in the order they run; a group of one is a plain apply(). */
export function batchGroups(
	steps: ReadonlyArray<{ action: HaproxyAction }>,
	batches: ReadonlySet<HaproxyAction["op"]> | undefined,
): number[][] {
	if (batches === undefined || batches.size === 0) return steps.map((_, i) => [i]);
	const seen = new Set<string>();
	const hoisted: number[] = [];
	for (const [i, { action }] of steps.entries()) {
		if (STORAGE_WRITES.has(action.op) && batches.has(action.op) && !seen.has(action.ref)) hoisted.push(i);
		seen.add(action.ref);
	}
	const hoistedSet = new Set(hoisted);
	const groups: number[][] = hoisted.length > 0 ? [hoisted] : [];
	let run: { op: HaproxyAction["op"]; refs: Set<string>; indexes: number[] } | undefined;
	for (const [i, { action }] of steps.entries()) {
		if (hoistedSet.has(i)) continue;
		if (run !== undefined && run.op === action.op && !run.refs.has(action.ref) && batches.has(action.op)) {
			run.refs.add(action.ref);
			run.indexes.push(i);
			continue;
		}
		run = { op: action.op, refs: new Set([action.ref]), indexes: [i] };
		groups.push(run.indexes);
	}
	return groups;
}
