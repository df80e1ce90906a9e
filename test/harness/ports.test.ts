/**
 * freePorts: a port a test holds unbound (Pebble's HTTP-01 port between orders, a killed CA's port) is never
 * handed to a test file in the other vitest worker, nor twice in one file.
 */
import { describe, expect, it } from "vitest";
import { freePorts } from "./ports.js";

describe("test harness: free ports", () => {
	it("draws from this worker's slice of 20000-32767, below the ephemeral range, never the same port twice", async () => {
		const id = Number(process.env.VITEST_POOL_ID);
		expect(id).toBeGreaterThanOrEqual(1);
		const size = Math.floor((32_767 - 20_000 + 1) / 4);
		const low = 20_000 + ((id - 1) % 4) * size;
		const seen = new Set<number>();
		for (let round = 0; round < 20; round++) {
			for (const port of await freePorts(10)) {
				expect(port).toBeGreaterThanOrEqual(low);
				expect(port).toBeLessThan(low + size);
				expect(seen.has(port)).toBe(false);
				seen.add(port);
			}
		}
	});
});
