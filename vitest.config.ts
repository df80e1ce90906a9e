import { defineConfig } from "vitest/config";

export default defineConfig({
	test: {
		include: ["test/**/*.test.ts"],
		setupFiles: ["./test/setup.ts"],
		reporters: ["default", "./test/summary-reporter.ts"],
		testTimeout: 60_000,
		hookTimeout: 60_000,
		// Real HAProxy and Pebble processes: keep the 2-core machine from thrashing.
		maxWorkers: 2,
	},
});
