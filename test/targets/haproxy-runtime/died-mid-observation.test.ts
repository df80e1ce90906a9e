/**
 * HAProxy dies while certificatee observes it (issue 23: HAProxy 3.2.0's watchdog killed the worker under a
 * deep pipeline and the master followed it, while `plan` printed "converged: nothing to do"). The stats
 * socket is reached through a relay that counts the bytes HAProxy answers; once part of the observation's
 * `show ssl cert` answers went through, the worker (then the master) is killed with SIGKILL. The endpoint
 * must be failed, naming the endpoint, never converged, and the next cycle must say the same.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { endpointState } from "../../../src/reconcile/convergence.js";
import type { EndpointReport } from "../../../src/reconcile/report.js";
import { createFleetRunner } from "../../../src/targets/haproxy/engine/fleet.js";
import type { EndpointDriver } from "../../../src/targets/haproxy/engine/model.js";
import {
	createRuntimeEndpoint,
	type RuntimeEndpoint,
	runtimeTargetSchema,
} from "../../../src/targets/haproxy-runtime/index.js";
import { createTestCa, generateKeys, issueTestLeaf, type TestLeaf } from "../../harness/certs.js";
import { scaled } from "../../harness/deadline.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { runtimeTarget } from "../../harness/targets.js";
import { desiredFromLeaf } from "../../reconcile/scenario.js";

const COUNT = 400;

interface Relay {
	path: string;
	/** Bytes HAProxy sent through the relay so far. */
	answered(): number;
	/** Resolves once HAProxy sent `bytes` bytes through the relay. */
	after(bytes: number): Promise<void>;
	close(): Promise<void>;
}

/** A unix socket relaying to `target`, counting what comes back. */
async function startRelay(target: string): Promise<Relay> {
	const dir = await mkdtemp(join(tmpdir(), "certificatee-relay-"));
	const path = join(dir, "relay.sock");
	let answered = 0;
	const waiters: Array<{ bytes: number; resolve: () => void }> = [];
	const sockets = new Set<net.Socket>();
	const server = net.createServer((client) => {
		const upstream = net.connect(target);
		for (const s of [client, upstream]) {
			sockets.add(s);
			s.on("error", () => undefined);
			s.on("close", () => {
				sockets.delete(s);
				client.destroy();
				upstream.destroy();
			});
		}
		upstream.on("data", (chunk: Buffer) => {
			answered += chunk.length;
			for (const w of waiters.filter((x) => answered >= x.bytes)) {
				waiters.splice(waiters.indexOf(w), 1);
				w.resolve();
			}
		});
		client.pipe(upstream);
		upstream.pipe(client);
	});
	await new Promise<void>((resolve) => server.listen(path, resolve));
	return {
		path,
		answered: () => answered,
		after: (bytes) =>
			answered >= bytes ? Promise.resolve() : new Promise((resolve) => waiters.push({ bytes, resolve })),
		async close() {
			for (const s of sockets) s.destroy();
			await new Promise<void>((resolve) => server.close(() => resolve()));
			await rm(dir, { recursive: true, force: true });
		},
	};
}

describe("targets/haproxy-runtime: HAProxy killed during an observation", () => {
	const cleanup: Array<() => Promise<void>> = [];
	afterEach(async () => {
		for (const c of cleanup.splice(0).reverse()) await c();
	});

	async function fleet(): Promise<{ h: Haproxy; leaves: Map<string, TestLeaf> }> {
		const ca = await createTestCa("died root");
		const keys = await generateKeys("ec-p256");
		const leaves = new Map<string, TestLeaf>();
		const files: Record<string, string> = {};
		await Promise.all(
			Array.from({ length: COUNT }, async (_, i) => {
				const ref = `d${String(i).padStart(4, "0")}.pem`;
				const leaf = await issueTestLeaf(ca, { names: [`d${i}.died.test`], keys });
				leaves.set(ref, leaf);
				files[ref] = leaf.combinedPem;
			}),
		);
		const h = await startHaproxy({ crtDir: files });
		cleanup.push(() => h.stop());
		return { h, leaves };
	}

	it.each([
		["the worker (the master follows it: exit-on-failure)", "worker"],
		["the master and the worker", "both"],
	] as const)("kill -9 of %s mid-observation: the endpoint is failed, not converged", async (_, whom) => {
		const { h, leaves } = await fleet();
		const relay = await startRelay(h.adminSocket);
		cleanup.push(() => relay.close());
		const target = runtimeTarget(h, { socket: relay.path, probe: h.address });
		cleanup.push(() => target.close());
		const desired = [...leaves]
			.slice(0, 20)
			.map(([ref, leaf]) =>
				desiredFromLeaf(ref.replace(/\.pem$/, ""), leaf, [`d${Number(ref.slice(1, 5))}.died.test`]),
			);

		const worker = await h.workerPid();
		// A `show ssl cert <name>` answer is about 700 bytes: a quarter of the details has gone through.
		const killed = relay.after((COUNT * 700) / 4).then(() => {
			process.kill(worker, "SIGKILL");
			if (whom === "both") process.kill(h.masterPid, "SIGKILL");
		});
		const report = await target.run(desired, "plan", new AbortController().signal);
		await killed;
		const e = report.endpoints[0];
		expect(relay.answered()).toBeGreaterThan((COUNT * 700) / 4);
		expect(e?.ok, JSON.stringify(e)).toBe(false);
		expect(e?.error?.code).toMatch(/^ENDPOINT_(UNAVAILABLE|TIMEOUT)$/);
		expect(e?.error?.message).toContain("lb1");

		// The next cycle finds it down too.
		const again = await target.run(desired, "plan", new AbortController().signal);
		expect(again.endpoints[0]?.ok).toBe(false);
	});
});

/**
 * HAProxy dies after certificatee observed it, before the verdict (issue 23: certificatee must notice when the
 * process it talks to died during a cycle). The runtime driver is the real one; only its observe() (or apply())
 * is wrapped to SIGKILL the worker at that instant, the one place a test can put the kill deterministically.
 * No probe: nothing but the worker check can tell that the picture is of a process that is gone.
 */
describe("targets/haproxy-runtime: HAProxy killed after the observation, before the verdict", () => {
	const cleanup: Array<() => Promise<void>> = [];
	afterEach(async () => {
		for (const c of cleanup.splice(0).reverse()) await c();
	});

	async function node(): Promise<{
		h: Haproxy;
		old: TestLeaf;
		renewed: TestLeaf;
		real: RuntimeEndpoint;
	}> {
		const ca = await createTestCa("died-after root");
		const [old, renewed] = await Promise.all([
			issueTestLeaf(ca, { names: ["after.died.test"], serial: "D1E0" }),
			issueTestLeaf(ca, { names: ["after.died.test"], serial: "D1E1" }),
		]);
		const h = await startHaproxy({ crtDir: { "after.pem": old.combinedPem } });
		cleanup.push(() => h.stop());
		const real = createRuntimeEndpoint(
			runtimeTargetSchema.parse({
				name: "lb1",
				type: "haproxy-runtime",
				socket: h.adminSocket,
				crt_dir: h.crtDir,
			}),
		);
		cleanup.push(() => real.close());
		return { h, old, renewed, real };
	}

	/** The fleet runner a haproxy-runtime target builds (target.ts), over `driver`. */
	function runner(h: Haproxy, driver: EndpointDriver) {
		return createFleetRunner({
			name: "lb1",
			kind: "haproxy-runtime",
			endpoints: [driver],
			policy: { legacyDuplicates: "remove", allowNameRemoval: false },
			storageDir: h.crtDir,
			newCertificateCrtList: h.crtDir,
			newCertificateDirDefault: true,
			backoff: false,
			now: () => new Date(),
		});
	}

	/** SIGKILL of the worker; resolves once it is gone (the master follows it: exit-on-failure). */
	async function killWorker(pid: number): Promise<void> {
		process.kill(pid, "SIGKILL");
		const gone = () => {
			try {
				// A zombie (its parent has not reaped it yet) is gone too.
				return readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
			} catch {
				return true;
			}
		};
		const deadline = performance.now() + scaled(10_000);
		while (!gone()) {
			if (performance.now() > deadline) throw new Error(`worker ${pid} still runs after SIGKILL`);
			await new Promise((r) => setTimeout(r, 20));
		}
	}

	it.each(["plan", "sync"] as const)(
		"%s: a worker killed right after the observation fails the endpoint (never converged), nothing written",
		async (mode) => {
			const { h, old, renewed, real } = await node();
			const worker = await h.workerPid();
			const driver: EndpointDriver = {
				...real,
				observe: async (signal) => {
					const o = await real.observe(signal);
					await killWorker(worker);
					return o;
				},
			};
			// plan: converged (nothing to do) on the observation; sync: a renewal to write.
			const want = desiredFromLeaf("after", mode === "plan" ? old : renewed, ["after.died.test"]);
			const report = await runner(h, driver).run([want], mode, new AbortController().signal);
			const e = report.endpoints[0] as EndpointReport;
			expect(e.ok, JSON.stringify(e)).toBe(false);
			expect(e.error?.code).toBe("ENDPOINT_UNAVAILABLE");
			expect(e.error?.message).toContain("lb1");
			expect(e.error?.message).toContain(`worker ${worker}`);
			expect(endpointState(e).state).not.toBe("converged");
			expect(e.steps.filter((s) => s.result === "ok")).toEqual([]);
			// Nothing was decided from the dead worker's picture: the file is as it was.
			expect(await readFile(join(h.crtDir, "after.pem"), "utf8")).toBe(old.combinedPem);
		},
	);

	it("sync: a worker killed right after it took the renewal: that write is not ok, the endpoint not converged", async () => {
		const { h, renewed, real } = await node();
		const worker = await h.workerPid();
		const driver: EndpointDriver = {
			...real,
			apply: async (action, signal) => {
				const result = await real.apply(action, signal);
				if (action.op === "runtime-set" && result.ok) await killWorker(worker);
				return result;
			},
		};
		const want = desiredFromLeaf("after", renewed, ["after.died.test"]);
		const report = await runner(h, driver).run([want], "sync", new AbortController().signal);
		const e = report.endpoints[0] as EndpointReport;
		const set = e.steps.find((s) => s.op === "runtime-set");
		expect(set?.result, JSON.stringify(e)).toBe("failed");
		expect(set?.error?.code).toBe("ENDPOINT_UNAVAILABLE");
		expect(set?.error?.message).toContain(`worker ${worker}`);
		// The file is on disk (what the next start loads): that write stays ok.
		expect(e.steps.find((s) => s.op === "storage-replace")?.result).toBe("ok");
		expect(await readFile(join(h.crtDir, "after.pem"), "utf8")).toBe(renewed.combinedPem);
		expect(endpointState(e).state).not.toBe("converged");
	});
});
