import { defineConfig } from "vitest/config";
import { scaled } from "./test/harness/deadline.js";

// The default limits stretch with the load when the run starts (1x idle, up to 3x: test/harness/deadline.ts).
const limit = scaled(60_000);

export default defineConfig({
	test: {
		include: ["test/**/*.test.ts"],
		setupFiles: ["./test/setup.ts"],
		reporters: ["default", "./test/summary-reporter.ts"],
		testTimeout: limit,
		hookTimeout: limit,
		// Real HAProxy and Pebble processes: keep the 2-core machine from thrashing.
		maxWorkers: 2,
	},
});
