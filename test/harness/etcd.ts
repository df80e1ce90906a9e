/**
 * Real etcd (Debian `etcd-server`, v3 API) on loopback ports from the OS: one member for most tests, three for
 * failover. Each member runs in the foreground from its own temp data dir; stop() sends SIGTERM, then SIGKILL
 * after 2 s (a member whose peers are gone may never exit on SIGTERM), and removes the dirs.
 *
 *   const etcd = await startEtcd();             // or startEtcd({ members: 3 })
 *   // ... connect to etcd.endpoints
 *   await etcd.kill(0);                          // SIGKILL one member (failover tests); etcd.restart(0) brings it back
 *   await etcd.stop();
 */
import { createCipheriv, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePorts } from "./ports.js";
import { freeze, type Proc, startProcess, stopProcess, waitUntil } from "./process.js";

export interface EtcdOptions {
	/** 1 (default) or 3. */
	members?: 1 | 3;
}

export interface EtcdHandle {
	/** Client URLs, one per member: "http://127.0.0.1:<port>". */
	endpoints: string[];
	/** SIGKILL member i (it stays down until restart(i)). */
	kill(i: number): Promise<void>;
	/** SIGSTOP member i; resolves once all its threads have stopped (it answers nothing more). */
	pause(i: number): Promise<void>;
	/** SIGCONT member i. */
	resume(i: number): void;
	/** Starts member i again from its data dir (it rejoins the cluster). */
	restart(i: number): Promise<void>;
	/** The members' output so far. */
	log(i?: number): string;
	/** Stops every member and removes the data dirs. Idempotent. */
	stop(): Promise<void>;
}

interface Member {
	name: string;
	client: number;
	peer: number;
	dir: string;
	proc?: Proc;
}

async function healthy(endpoint: string): Promise<boolean> {
	const response = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(1000) });
	if (!response.ok) return false;
	return ((await response.json()) as { health?: string }).health === "true";
}

export async function startEtcd(options: EtcdOptions = {}): Promise<EtcdHandle> {
	const count = options.members ?? 1;
	const root = await mkdtemp(path.join(tmpdir(), "certificatee-etcd-"));
	const ports = await freePorts(count * 2);
	const token = path.basename(root);
	const members: Member[] = Array.from({ length: count }, (_, i) => ({
		name: `m${i}`,
		client: ports[2 * i]!,
		peer: ports[2 * i + 1]!,
		dir: path.join(root, `m${i}`),
	}));
	const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peer}`).join(",");
	const url = (m: Member) => `http://127.0.0.1:${m.client}`;

	function spawnMember(m: Member, state: "new" | "existing"): Proc {
		return startProcess(
			"etcd",
			[
				"--name",
				m.name,
				"--data-dir",
				m.dir,
				"--listen-client-urls",
				url(m),
				"--advertise-client-urls",
				url(m),
				"--listen-peer-urls",
				`http://127.0.0.1:${m.peer}`,
				"--initial-advertise-peer-urls",
				`http://127.0.0.1:${m.peer}`,
				"--initial-cluster",
				initialCluster,
				"--initial-cluster-token",
				token,
				"--initial-cluster-state",
				state,
				// Tests compact on purpose; keep etcd from doing it on its own.
				"--auto-compaction-retention",
				"0",
				"--log-level",
				"warn",
			],
			{ cwd: root, env: { ...process.env, ETCD_UNSUPPORTED_ARCH: process.env.ETCD_UNSUPPORTED_ARCH ?? "" } },
		);
	}

	const waitHealthy = (m: Member) => waitUntil(`etcd member ${m.name}`, m.proc!, () => healthy(url(m)));
	let stopped = false;
	const stop = async () => {
		if (stopped) return;
		stopped = true;
		await Promise.all(members.map((m) => stopProcess(m.proc)));
		await rm(root, { recursive: true, force: true });
	};
	try {
		for (const m of members) m.proc = spawnMember(m, "new");
		await Promise.all(members.map(waitHealthy));
	} catch (e) {
		await stop();
		throw e;
	}
	const member = (i: number) => {
		const m = members[i];
		if (!m) throw new Error(`no etcd member ${i}`);
		return m;
	};
	return {
		endpoints: members.map(url),
		async kill(i) {
			const m = member(i);
			if (!m.proc || m.proc.child.exitCode !== null || m.proc.child.signalCode !== null) return;
			m.proc.child.kill("SIGKILL");
			await m.proc.exited;
		},
		async pause(i) {
			const proc = member(i).proc;
			if (proc) await freeze(proc.child);
		},
		resume: (i) => void member(i).proc?.child.kill("SIGCONT"),
		async restart(i) {
			const m = member(i);
			m.proc = spawnMember(m, "existing");
			await waitHealthy(m);
		},
		log: (i) =>
			members
				.filter((_, j) => i === undefined || i === j)
				.map((m) => m.proc?.output() ?? "")
				.join("\n"),
		stop,
	};
}

/**
 * A value sealed the way certificatee did before issue 25 (format 1: the state key alone as associated data),
 * for tests of the migration: members still read it, and write format 2 from then on.
 */
export function sealFormat1(key: Buffer, stateKey: string, plaintext: Buffer) {
	const nonce = randomBytes(12);
	const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: 16 });
	cipher.setAAD(Buffer.from(stateKey, "utf8"));
	const data = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
	return {
		v: 1 as const,
		alg: "A256GCM" as const,
		nonce: nonce.toString("base64"),
		data: data.toString("base64"),
	};
}
