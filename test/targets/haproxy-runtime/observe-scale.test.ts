import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuntimeEndpoint, runtimeTargetSchema } from "../../../src/targets/haproxy-runtime/index.js";
import { createTestCa, generateKeys, issueTestLeaf } from "../../harness/certs.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";

const COUNT = 1_000;

describe("targets/haproxy-runtime: observing 1,000 certificates over one connection", () => {
	let h: Haproxy;
	const serials = new Map<string, string>();

	beforeAll(async () => {
		const ca = await createTestCa("scale root");
		const keys = await generateKeys("ec-p256");
		const files: Record<string, string> = {};
		const leaves = await Promise.all(
			Array.from({ length: COUNT }, (_, i) => issueTestLeaf(ca, { names: [`h${i}.scale.test`], keys })),
		);
		leaves.forEach((leaf, i) => {
			const ref = `h${String(i).padStart(4, "0")}.pem`;
			files[ref] = leaf.combinedPem;
			serials.set(ref, leaf.serial);
		});
		h = await startHaproxy({ crtDir: files });
	});
	afterAll(async () => {
		await h?.stop();
	});

	it("lists every ref with matching storage and runtime identity, over one socket connection", async () => {
		const driver = createRuntimeEndpoint(
			runtimeTargetSchema.parse({
				name: "scale",
				type: "haproxy-runtime",
				socket: h.adminSocket,
				crt_dir: h.crtDir,
			}),
		);
		const connections = async () => Number((await h.command("show info")).match(/^CumConns: (\d+)$/m)?.[1]);
		try {
			const before = await connections();
			const cold = performance.now();
			const first = await driver.observe(new AbortController().signal);
			const coldMs = performance.now() - cold;
			const warm = performance.now();
			const o = await driver.observe(new AbortController().signal);
			const warmMs = performance.now() - warm;
			expect(first.ok && o.ok).toBe(true);
			if (!o.ok) return;
			// Plus the bind's default certificate, observed from outside crt_dir.
			const inDir = o.refs.filter((r) => r.external === undefined);
			expect(inDir).toHaveLength(COUNT);
			expect(o.refs).toHaveLength(COUNT + 1);
			for (const ref of inDir) {
				const serial = serials.get(ref.ref);
				expect(ref.storage?.serial).toBe(serial);
				expect(ref.runtime?.serial).toBe(serial);
				expect(ref.runtime?.sha1).toBe(ref.storage?.sha1);
				expect(ref.runtime?.names).toEqual([`h${Number(ref.ref.slice(1, 5))}.scale.test`]);
				expect(ref.crtLists).toEqual([h.crtDir]);
			}
			// Two full observations cost HAProxy one connection (plus the one this count itself uses).
			expect((await connections()) - before).toBe(2);
			console.log(
				`[bench] observe ${COUNT} certificates (files + show ssl cert x${COUNT} + crt-lists): first ${coldMs.toFixed(0)} ms, again ${warmMs.toFixed(0)} ms (files cached by stat), one socket connection`,
			);
		} finally {
			await driver.close();
		}
	});
});
