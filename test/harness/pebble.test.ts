import { X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { startPebble } from "./pebble.js";

describe("pebble harness", () => {
	it("starts Pebble and challtestsrv on free ports, serves a directory and a root, and stops cleanly", async () => {
		const pebble = await startPebble({ validation: "real" });
		try {
			const agent = new Agent({ connect: { ca: pebble.caPem } });
			const res = await request(pebble.directoryUrl, { dispatcher: agent });
			const dir = (await res.body.json()) as Record<string, unknown>;
			expect(dir.newOrder).toMatch(/^https:\/\/localhost:\d+\//);
			await agent.close();
			const root = new X509Certificate(await pebble.root());
			expect(root.subject).toContain("Pebble Root CA");
			expect(new X509Certificate(await pebble.intermediate()).checkIssued(root)).toBe(true);
			expect(pebble.challtestsrv).toBeDefined();
			await pebble.challtestsrv?.setTxt("_acme-challenge.x.test", "v");
		} finally {
			await pebble.stop();
		}
		expect(existsSync(pebble.caFile)).toBe(false);
		await expect(request(pebble.directoryUrl)).rejects.toThrow();
	});
});
