/**
 * Cluster members for tests against real etcd (test/harness/etcd.ts): a member is its own connection and session
 * (plus leadership when asked), its log captured as JSON lines; keys live under a prefix unique to the test.
 *
 *   const a = await startMember(etcd.endpoints, prefix, "a", { ttlSeconds: 2, leadership: true });
 *   await eventually("a leads", () => a.leadership!.isLeader(), 5000);
 *   await a.close();
 */
import { randomUUID } from "node:crypto";
import { connectEtcd, type EtcdConnection } from "../../src/cluster/etcd.js";
import { type Leadership, startLeadership } from "../../src/cluster/leadership.js";
import { type Membership, startMembership } from "../../src/cluster/membership.js";
import { type Session, startSession } from "../../src/cluster/session.js";
import { createLogger, type Logger } from "../../src/log.js";
import { type Proc, startProcess } from "./process.js";

export const uniquePrefix = (): string => `t-${randomUUID().slice(0, 8)}/`;

export interface LogLine {
	level: number;
	msg: string;
	err?: string;
}

/** A debug-level logger whose JSON lines are kept in `lines`. */
export function captureLog(): { log: Logger; lines: LogLine[] } {
	const lines: LogLine[] = [];
	const log = createLogger({
		level: "debug",
		destination: { write: (l: string) => lines.push(JSON.parse(l)) },
	});
	return { log, lines };
}

const PINO_WARN = 40;
export const warnings = (lines: readonly LogLine[]): LogLine[] => lines.filter((l) => l.level >= PINO_WARN);

/** Polls `probe` every 10 ms until it returns a value other than undefined/false; fails naming `what` after `ms`. */
export async function eventually<T>(
	what: string,
	probe: () => T | undefined | false,
	ms: number,
): Promise<T> {
	const deadline = Date.now() + ms;
	for (;;) {
		const v = probe();
		if (v !== undefined && v !== false) return v;
		if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

export interface TestMember {
	name: string;
	conn: EtcdConnection;
	session: Session;
	leadership?: Leadership;
	membership?: Membership;
	lines: LogLine[];
	/** Resigns, closes the session (revokes the lease) and the connection. Idempotent. */
	close(): Promise<void>;
}

export function startMember(
	endpoints: string[],
	prefix: string,
	name: string,
	options: {
		ttlSeconds: number;
		leadership?: boolean;
		membership?: boolean;
		clock?: () => number;
		deadlineMs?: number;
	},
): TestMember {
	const { log, lines } = captureLog();
	const conn = connectEtcd({ endpoints, prefix, deadline_ms: options.deadlineMs ?? 1000 });
	const session = startSession(conn, {
		ttlSeconds: options.ttlSeconds,
		log,
		...(options.clock ? { clock: options.clock } : {}),
	});
	const leadership = options.leadership ? startLeadership(conn, session, { member: name, log }) : undefined;
	const membership = options.membership ? startMembership(conn, session, { member: name, log }) : undefined;
	let closed = false;
	return {
		name,
		conn,
		session,
		...(leadership ? { leadership } : {}),
		...(membership ? { membership } : {}),
		lines,
		async close() {
			if (closed) return;
			closed = true;
			await Promise.all([leadership?.close(), membership?.close()]);
			await session.close();
			conn.close();
		},
	};
}

/** The members that lead right now. */
export const leaders = (members: readonly TestMember[]): TestMember[] =>
	members.filter((m) => m.leadership?.isLeader());

/** What test/cluster/children/member.ts prints: its state when it changes, and its fenced writes once deposed. */
export interface ChildLine {
	t: number;
	leader?: boolean;
	validUntil?: number;
	lease?: string;
	fence?: string;
	leaderName?: string;
	members?: string[];
	write?: boolean;
	writeError?: string;
}

/** A member in a child process (so a test can SIGSTOP or SIGKILL it); stop it with stopProcess(child.proc). */
export function startChildMember(
	endpoints: string[],
	prefix: string,
	name: string,
	options: { ttlSeconds: number; membership?: boolean },
): { proc: Proc; lines(): ChildLine[] } {
	const proc = startProcess(
		process.execPath,
		[
			"--import",
			"tsx",
			"test/cluster/children/member.ts",
			endpoints.join(","),
			prefix,
			name,
			String(options.ttlSeconds),
			...(options.membership ? ["membership"] : []),
		],
		{ cwd: process.cwd(), env: process.env },
	);
	const lines = () =>
		proc
			.output()
			.split("\n")
			.filter((l) => l.startsWith("{"))
			.map((l) => JSON.parse(l) as ChildLine);
	return { proc, lines };
}
