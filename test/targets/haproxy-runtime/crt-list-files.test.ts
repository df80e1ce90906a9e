/**
 * The haproxy-runtime driver and crt-list files on a real HAProxy: what observe() reports about each list,
 * and the last guard before a certificate file is unlinked (never while a crt-list file names it).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
	createRuntimeEndpoint,
	type RuntimeEndpoint,
	runtimeTargetSchema,
} from "../../../src/targets/haproxy-runtime/index.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { assertReloadSafe } from "../../harness/invariant.js";

const signal = new AbortController().signal;
const running: Array<{ h: Haproxy; driver: RuntimeEndpoint }> = [];
afterEach(async () => {
	for (const r of running.splice(0)) {
		await r.driver.close();
		await r.h.stop();
	}
});

describe("targets/haproxy-runtime crt-list files", () => {
	it("observe tells the file from the crt directory; a file a crt-list names is never unlinked", async () => {
		const ca = await createTestCa("crt-list guard CA");
		const listed = await issueTestLeaf(ca, { names: ["listed.test"] });
		const h = await startHaproxy({
			crtList: [
				{ file: "listed.pem", pem: listed.combinedPem, sslOptions: "alpn h2", filters: ["listed.test"] },
			],
		});
		const listDir = join(h.dir, "list");
		const driver = createRuntimeEndpoint(
			runtimeTargetSchema.parse({
				name: "lb1",
				type: "haproxy-runtime",
				socket: h.adminSocket,
				crt_dir: listDir,
			}),
		);
		running.push({ h, driver });

		const o = await driver.observe(signal);
		if (!o.ok) throw o.error;
		expect(o.crtLists).toEqual(
			expect.arrayContaining([
				{ name: h.crtDir, kind: "directory", editable: false },
				{
					name: h.crtListPath,
					kind: "file",
					editable: true,
					lines: { [join(listDir, "listed.pem")]: [`${join(listDir, "listed.pem")} [alpn h2] listed.test`] },
				},
			]),
		);

		const result = await driver.apply({ op: "storage-delete", ref: "listed.pem" }, signal);
		expect(result.ok).toBe(false);
		expect(result.error?.message).toContain(h.crtListPath);
		expect(existsSync(join(listDir, "listed.pem"))).toBe(true);
		await assertReloadSafe(h, { names: ["listed.test"] });
	});
});
