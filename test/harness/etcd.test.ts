import { Etcd3 } from "etcd3";
import { afterAll, describe, expect, it } from "vitest";
import { type EtcdHandle, startEtcd } from "./etcd.js";

describe("etcd harness", () => {
	const started: EtcdHandle[] = [];
	afterAll(async () => {
		await Promise.all(started.map((e) => e.stop()));
	});

	it("starts one member that stores and returns a value", async () => {
		const etcd = await startEtcd();
		started.push(etcd);
		const client = new Etcd3({ hosts: etcd.endpoints });
		try {
			await client.put("harness/one").value("1");
			expect(await client.get("harness/one").string()).toBe("1");
		} finally {
			client.close();
		}
	});

	it("starts three members that keep serving with one killed", async () => {
		const etcd = await startEtcd({ members: 3 });
		started.push(etcd);
		const client = new Etcd3({ hosts: etcd.endpoints });
		try {
			await client.put("harness/three").value("a");
			await etcd.kill(0);
			await client.put("harness/three").value("b");
			expect(await client.get("harness/three").string()).toBe("b");
			await etcd.restart(0);
			const only = new Etcd3({ hosts: [etcd.endpoints[0]!] });
			try {
				expect(await only.get("harness/three").string()).toBe("b");
			} finally {
				only.close();
			}
		} finally {
			client.close();
		}
	}, 60_000);
});
