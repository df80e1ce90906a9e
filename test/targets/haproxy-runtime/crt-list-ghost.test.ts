/**
 * A crt-list line naming a file that does not exist (issue 21, item 5): HAProxy's next reload fails on it
 * (`unable to stat SSL certificate`) whatever the running worker holds. certificatee reads that file every
 * cycle, so it reports every such line, naming file and line, and the endpoint is not converged while it stands.
 */
import { appendFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { endpointState } from "../../../src/reconcile/convergence.js";
import { endpointFailures } from "../../../src/reconcile/failures.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { assertConfigValid } from "../../harness/invariant.js";
import { syncOnce as cycle, rig } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig({ reloadSafe: true });
beforeAll(async () => {
	ca = await createTestCa("ghost CA");
});

describe("crt-list lines naming missing files (haproxy-runtime target)", () => {
	it("reported with file and line, the endpoint failed (not converged) until the line goes", async () => {
		const names = ["g.lay.test"];
		const leaf = await issueTestLeaf(ca, { names });
		const h = await r.haproxy({ crtList: [{ file: "g.pem", pem: leaf.combinedPem }] });
		const listDir = join(h.dir, "list");
		const t = r.runtime(h, { crt_dir: listDir, crt_list: h.crtListPath });
		const want = [desiredFromLeaf("g", leaf, names)];
		expect(endpointState(await cycle(t, want, { expectOk: true })).state).toBe("converged");

		const clean = await readFile(h.crtListPath, "utf8");
		await appendFile(h.crtListPath, `# added by hand\n${listDir}/ghost.pem [alpn h2] ghost.lay.test\n`);
		await expect(assertConfigValid(h)).rejects.toThrow(/ghost\.pem/);
		const e = await cycle(t, want, { expectOk: true });
		expect(e.crtListProblems).toEqual([{ crtList: h.crtListPath, line: 3, file: `${listDir}/ghost.pem` }]);
		const state = endpointState(e);
		expect(state.state).toBe("failed");
		expect(state.state !== "converged" && state.reason).toContain(
			`CRT_LIST_LINE_UNRESOLVED: ${h.crtListPath} line 3 names ${listDir}/ghost.pem, which does not exist`,
		);
		expect(endpointFailures(e).map((f) => f.kind)).toEqual(["crt-list"]);

		await writeFile(h.crtListPath, clean);
		const fixed = await cycle(t, want, { expectOk: true });
		expect(fixed.crtListProblems).toBeUndefined();
		expect(endpointState(fixed).state).toBe("converged");
	});
});
