import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
	createDataplaneEndpoint,
	dataplaneEndpointSchema,
} from "../../../src/targets/haproxy-dataplane/index.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";
import { type DpapiDouble, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";

const COUNT = 100;
let h: Haproxy;
let double: DpapiDouble;

beforeAll(async () => {
	const ca = await createTestCa("dataplane scale test");
	const files: Record<string, string> = {};
	for (let i = 0; i < COUNT; i++) {
		files[`c${String(i).padStart(3, "0")}.pem`] = (
			await issueTestLeaf(ca, { names: [`c${i}.scale.test`] })
		).combinedPem;
	}
	h = await startHaproxy({ crtDir: files });
	double = await startDpapiDouble({ haproxy: h });
});

afterAll(async () => {
	await double?.close();
	await h?.stop();
});

describe("targets/haproxy-dataplane observe at scale", () => {
	it(`observes ${COUNT} certificates with one GET each per side, all joined`, async () => {
		const driver = createDataplaneEndpoint(
			dataplaneEndpointSchema.parse({
				name: "scale",
				url: double.url,
				username: double.username,
				password: double.password,
			}),
			{ now: () => new Date() },
		);
		try {
			const t0 = performance.now();
			const o = await driver.observe(AbortSignal.timeout(30_000));
			const first = performance.now() - t0;
			const t1 = performance.now();
			const again = await driver.observe(AbortSignal.timeout(30_000));
			const second = performance.now() - t1;
			console.log(
				`observe of ${COUNT} certificates through the double: ${first.toFixed(0)} ms, again ${second.toFixed(0)} ms`,
			);
			if (!o.ok) throw o.error;
			const joined = o.refs.filter(
				(r) => r.storage?.serial !== undefined && r.storage.serial === r.runtime?.serial,
			);
			expect(joined).toHaveLength(COUNT);
			// The first observation GETs every item; the second (same worker, same listings) none: incremental.
			expect(double.count("getOneStorageSSLCertificate")).toBe(COUNT);
			expect(double.count("getCert")).toBe(COUNT + 1);
			expect(again.ok && again.info?.observation).toBe("incremental");
			expect(again.ok && again.refs).toEqual(o.refs);
			double.assertSpecClean();
		} finally {
			await driver.close();
		}
	});
});
