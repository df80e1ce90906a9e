/**
 * Issue 25, findings 4 and 6: an on_change or dns_hook timeout bounds the wait whatever the command leaves
 * behind, its whole process group is killed at the timeout, and it never sees certificatee's secrets.
 * Real processes (sh, sleep), each through the function the product calls.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { commandEnvironment } from "../../src/base/command.js";
import { createDnsHook } from "../../src/sources/acme/dns01.js";
import { runHook } from "../../src/targets/directory/hook.js";

let dir: string;
beforeEach(() => {
	dir = mkdtempSync(join(tmpdir(), "certificatee-command-"));
});
afterEach(() => {
	rmSync(dir, { recursive: true, force: true });
});

const alive = (pid: number) => {
	try {
		process.kill(pid, 0);
		return true;
	} catch {
		return false;
	}
};

/** Waits until `probe` holds, polling; fails after `ms`. */
async function until(what: string, probe: () => boolean, ms = 10_000): Promise<void> {
	const deadline = Date.now() + ms;
	while (!probe()) {
		if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
		await new Promise((r) => setTimeout(r, 20));
	}
}

describe("operator commands (on_change, dns_hook)", () => {
	it("on_change: a command that exits 0 leaving a grandchild on stderr is done at its exit, not at the grandchild's", async () => {
		const started = Date.now();
		const result = await runHook({ command: ["sh", "-c", "sleep 25 & exit 0"], timeoutMs: 2_000, env: {} });
		expect(result).toMatchObject({ ok: true });
		expect(Date.now() - started).toBeLessThan(2_000);
	}, 40_000);

	it("on_change: at the timeout the whole process group is killed, grandchild included, and the wait ends", async () => {
		const pidFile = join(dir, "grandchild.pid");
		const started = Date.now();
		const result = await runHook({
			command: ["sh", "-c", `sleep 30 & echo $! > ${pidFile}; wait`],
			timeoutMs: 500,
			env: {},
		});
		expect(Date.now() - started).toBeLessThan(8_000);
		expect(result).toMatchObject({ ok: false, error: { code: "HOOK_FAILED" } });
		expect(!result.ok && result.error.message).toMatch(/timed out after 500 ms/);
		const grandchild = Number(readFileSync(pidFile, "utf8"));
		await until("the grandchild's death", () => !alive(grandchild));
	}, 40_000);

	it("on_change: the stderr of a failing command still names the failure", async () => {
		const result = await runHook({
			command: ["sh", "-c", "echo 'reload refused' >&2; exit 3"],
			timeoutMs: 5_000,
			env: {},
		});
		expect(!result.ok && result.error.message).toBe("on_change command exited with 3: reload refused");
	});

	it("dns_hook: the same bounded wait and group kill", async () => {
		const pidFile = join(dir, "dns-grandchild.pid");
		const hook = createDnsHook(["sh", "-c", `sleep 30 & echo $! > ${pidFile}; wait`, "hook"], 500);
		const started = Date.now();
		const error = await hook
			.run("set", "_acme-challenge.a.test", "v", new AbortController().signal)
			.catch((e: unknown) => e);
		expect(Date.now() - started).toBeLessThan(8_000);
		expect(error).toMatchObject({
			code: "HOOK_FAILED",
			message: expect.stringMatching(/timed out after 500 ms/),
		});
		await until("the grandchild's death", () => !alive(Number(readFileSync(pidFile, "utf8"))));
		const quick = createDnsHook(["sh", "-c", "sleep 25 & exit 0", "hook"], 2_000);
		const t = Date.now();
		await quick.run("clear", "_acme-challenge.a.test", "v", new AbortController().signal);
		expect(Date.now() - t).toBeLessThan(2_000);
	}, 40_000);

	it("hooks see PATH, HOME, the locale and the CERTIFICATEE_* facts, never certificatee's secrets", async () => {
		const saved = { ...process.env };
		Object.assign(process.env, {
			CERTIFICATEE_ENCRYPTION_KEY: "c2VjcmV0LWVuY3J5cHRpb24ta2V5LTMyLWJ5dGVzISE=",
			DPAPI_PASSWORD: "hunter2-dataplane",
			AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			LC_ALL: "C.UTF-8",
		});
		try {
			const out = join(dir, "env.txt");
			const hook = await runHook({
				command: ["sh", "-c", `env > ${out}`],
				timeoutMs: 5_000,
				env: { CERTIFICATEE_CERTIFICATE: "web", CERTIFICATEE_TARGET: "certs" },
			});
			expect(hook).toMatchObject({ ok: true });
			const dnsOut = join(dir, "dns-env.txt");
			await createDnsHook(["sh", "-c", `env > ${dnsOut}`, "hook"], 5_000).run(
				"set",
				"_acme-challenge.a.test",
				"v",
				new AbortController().signal,
			);
			for (const file of [out, dnsOut]) {
				const env = readFileSync(file, "utf8");
				expect(env).not.toContain("c2VjcmV0");
				expect(env).not.toContain("hunter2");
				expect(env).not.toContain("wJalrXUtnFEMI");
				expect(env).toContain(`PATH=${process.env.PATH}`);
				expect(env).toContain("LC_ALL=C.UTF-8");
			}
			expect(readFileSync(out, "utf8")).toContain("CERTIFICATEE_CERTIFICATE=web");
			expect(Object.keys(commandEnvironment(process.env)).sort()).toEqual(
				Object.keys(process.env)
					.filter(
						(k) =>
							["PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME"].includes(k) ||
							k.startsWith("LC_"),
					)
					.sort(),
			);
		} finally {
			for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
			Object.assign(process.env, saved);
		}
	});
});
