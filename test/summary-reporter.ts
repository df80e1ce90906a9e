import type { Reporter, TestModule } from "vitest/node";

/** Prints the plain `N passed, N failed, N skipped` closing line CI reads. */
export default class SummaryReporter implements Reporter {
	onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
		let passed = 0;
		let failed = 0;
		let skipped = 0;
		for (const m of testModules) {
			const tests = [...m.children.allTests()];
			for (const t of tests) {
				const s = t.result().state;
				if (s === "passed") passed++;
				else if (s === "failed") failed++;
				else skipped++;
			}
			// A failing beforeAll/afterAll fails the file, not a test: count it, or the line reads all green.
			if (m.state() === "failed" && !tests.some((t) => t.result().state === "failed")) failed++;
		}
		console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
	}
}
