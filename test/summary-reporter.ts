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
			if (m.state() === "failed" && tests.length === 0) failed++;
		}
		console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
	}
}
