/**
 * The log level: `--log-level`, else `$CERTIFICATEE_LOG_LEVEL`, else the file's `log_level`, else info.
 * The built CLI syncs one certificate from a directory source into a directory target; the write's audit line
 * is logged at info, so it shows whether info is on.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createContext } from "../../src/cli/context.js";
import { createTestCa, issueTestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";

let dir: string;
let pem: string;

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-log-level-"));
	const ca = await createTestCa("log level CA");
	pem = (await issueTestLeaf(ca, { names: ["log.test"] })).combinedPem;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fresh source, target and state directory, so every sync writes (and logs its write). */
function config(name: string, logLevel?: string): string {
	const base = join(dir, name);
	mkdirSync(join(base, "source"), { recursive: true });
	writeFileSync(join(base, "source", "log.pem"), pem, { mode: 0o600 });
	const file = join(base, "certificatee.yaml");
	writeFileSync(
		file,
		[
			`state_dir: ${join(base, "state")}`,
			...(logLevel ? [`log_level: ${logLevel}`] : []),
			"sources:",
			`  - { name: files, type: directory, path: ${join(base, "source")} }`,
			"targets:",
			`  - { name: out, type: directory, path: ${join(base, "out")} }`,
			"",
		].join("\n"),
	);
	return file;
}

const infoLines = (stderr: string) =>
	stderr
		.split("\n")
		.filter((l) => l.startsWith("{"))
		.map((l) => JSON.parse(l) as { level: number; msg: string })
		.filter((l) => l.level === 30);

describe("log level", () => {
	it("the file's log_level is honoured: warn hides the info audit lines that the default shows", async () => {
		const quiet = await certificatee(["sync", "--once", "-c", config("warn", "warn")]);
		expect(quiet.code).toBe(0);
		expect(infoLines(quiet.stderr)).toEqual([]);
		const loud = await certificatee(["sync", "--once", "-c", config("default")]);
		expect(loud.code).toBe(0);
		expect(infoLines(loud.stderr).length).toBeGreaterThan(0);
	});

	it("--log-level and $CERTIFICATEE_LOG_LEVEL win over the file", async () => {
		const flag = await certificatee(["sync", "--once", "--log-level", "info", "-c", config("flag", "warn")]);
		expect(flag.code).toBe(0);
		expect(infoLines(flag.stderr).length).toBeGreaterThan(0);
		const env = await certificatee(["sync", "--once", "-c", config("env", "warn")], {
			env: { CERTIFICATEE_LOG_LEVEL: "info" },
		});
		expect(env.code).toBe(0);
		expect(infoLines(env.stderr).length).toBeGreaterThan(0);
	});

	it("the level follows each load of the file (a SIGHUP reload), unless chosen on the command line", () => {
		const file = config("reload", "debug");
		const ctx = createContext({ config: file }, {});
		expect(ctx.log.level).toBe("info");
		ctx.loadConfig();
		expect(ctx.log.level).toBe("debug");
		writeFileSync(file, `state_dir: ${join(dir, "reload", "state")}\nlog_level: error\n`);
		ctx.loadConfig();
		expect(ctx.log.level).toBe("error");
		const pinned = createContext({ config: file, logLevel: "warn" }, {});
		pinned.loadConfig();
		expect(pinned.log.level).toBe("warn");
	});
});
