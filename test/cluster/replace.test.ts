/**
 * A deliberate replacement in cluster mode (issue 25, finding 5): two `certificatee run` members on a real etcd,
 * one real HAProxy node serving a 300-day certificate, and a directory source that now holds an 80-day one for
 * the same name (a CA change). Never-downgrade refuses it (UPDATE_WOULD_DOWNGRADE, with a hint naming
 * `certificatee replace`), across a restart; `certificatee replace` records it in etcd, the members' watch wakes
 * them, the node serves the 80-day certificate, and it stays served after the leader is killed and restarted.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial as normal } from "../../src/certificates/names.js";
import type { StatusDocument } from "../../src/metrics/status-view.js";
import { createTestCa, issueTestLeaf, type TestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { scaled } from "../harness/deadline.js";
import { type EtcdHandle, startEtcd } from "../harness/etcd.js";
import { type Haproxy, startHaproxy } from "../harness/haproxy.js";
import { stopReloadSafe } from "../harness/invariant.js";
import { type Replicas, startReplicas } from "../harness/replicas.js";

const DAY = 86_400_000;
let etcd: EtcdHandle;
let node: Haproxy;
let r: Replicas | undefined;
let dir: string;
let long: TestLeaf;
let short: TestLeaf;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-replace-"));
	const oldCa = await createTestCa("old CA");
	const newCa = await createTestCa("new CA");
	long = await issueTestLeaf(oldCa, { names: ["shop.test"], notAfter: new Date(Date.now() + 300 * DAY) });
	short = await issueTestLeaf(newCa, { names: ["shop.test"], notAfter: new Date(Date.now() + 80 * DAY) });
	etcd = await startEtcd();
	node = await startHaproxy({ crtDir: { "shop.pem": long.combinedPem } });
	writeFileSync(join(dir, "shop.pem"), short.combinedPem, { mode: 0o600 });
}, 60_000);

afterAll(async () => {
	await r?.stop();
	await etcd?.stop();
	rmSync(dir, { recursive: true, force: true });
	// Last: a failed check must not skip the rest of the cleanup.
	await stopReloadSafe(node);
});

/** Member i's /status.json once `ok` holds of it. */
async function statusWhen(
	i: number,
	what: string,
	ok: (doc: StatusDocument) => boolean,
): Promise<StatusDocument> {
	const deadline = Date.now() + scaled(30_000);
	let last: StatusDocument | undefined;
	for (;;) {
		last = (await r?.json(i, "/status.json")) as StatusDocument | undefined;
		if (last && ok(last)) return last;
		if (Date.now() > deadline)
			throw new Error(`member ${i} never showed ${what}: ${JSON.stringify(last?.summary)}`);
		await new Promise((res) => setTimeout(res, 100));
	}
}

const refused = (doc: StatusDocument) =>
	doc.targets.some((t) =>
		t.endpoints.some((e) =>
			e.verdicts.some((v) => v.class === "refused" && v.code === "UPDATE_WOULD_DOWNGRADE"),
		),
	);

describe("cluster mode: a deliberate replacement that expires earlier", () => {
	it("is refused by default, across a restart; certificatee replace pushes it, and it stays after the leader restarts", async () => {
		r = await startReplicas({
			etcdEndpoints: etcd.endpoints,
			nodes: [node],
			members: 2,
			certificates: [],
			directorySource: dir,
		});
		let leader = await r.leader();
		const doc = await statusWhen(leader, "UPDATE_WOULD_DOWNGRADE", refused);
		const endpoint = doc.summary.endpoints[0];
		expect(endpoint?.state).toBe("failed");
		expect(endpoint?.hint).toContain("certificatee replace shop");
		expect(await r.served("shop.test")).toEqual([normal(long.serial)]);

		// Restarted, the leader still refuses it.
		r.replica(leader).daemon.signal("SIGKILL");
		await r.replica(leader).daemon.exited;
		r.restart(leader);
		leader = await r.leader();
		await statusWhen(leader, "UPDATE_WOULD_DOWNGRADE after a restart", refused);
		expect(await r.served("shop.test")).toEqual([normal(long.serial)]);

		const replace = await certificatee(
			["replace", "shop", "--reason", "CA change, ticket 99", "--config", r.configFile],
			{ env: r.env },
		);
		expect(replace.code, replace.stderr).toBe(0);
		expect(replace.stdout).toContain(`shop: serial ${normal(short.serial)}`);
		expect(replace.stdout).toContain("recorded in etcd");
		expect(replace.stderr).toMatch(/"msg":"deliberate replacement recorded"/);
		await r.waitServed("shop.test", (s) => s === normal(short.serial));
		const audit = await r.replica(leader).daemon.waitForLog(/^deliberate replacement in effect/);
		expect(audit).toMatchObject({
			certificate: "shop",
			reason: "CA change, ticket 99",
			newSerial: normal(short.serial),
		});
		const served = await statusWhen(
			leader,
			"shop converged",
			(d) => d.summary.endpoints[0]?.state === "converged",
		);
		expect(served.summary.certificates.find((c) => c.name === "shop")?.replacement?.reason).toBe(
			"CA change, ticket 99",
		);

		// Killed and restarted, the leader (and whoever leads) keeps it: nothing reverts, nothing is refused.
		r.replica(leader).daemon.signal("SIGKILL");
		await r.replica(leader).daemon.exited;
		r.restart(leader);
		leader = await r.leader();
		await statusWhen(
			leader,
			"shop converged after a restart",
			(d) => d.summary.endpoints[0]?.state === "converged",
		);
		expect(await r.served("shop.test")).toEqual([normal(short.serial)]);
		const plan = await certificatee(["plan", "--config", r.configFile], { env: r.env });
		expect(plan.code, plan.stdout).toBe(0);
	}, 180_000);
});
