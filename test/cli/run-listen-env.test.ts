/**
 * The container image's default `listen` comes from CERTIFICATEE_LISTEN: the real daemon serves /healthz on
 * the address the variable names when the configuration leaves `listen` out, and on the file's own otherwise.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certificatee, ensureBuilt, spawnCertificatee } from "../harness/cli.js";
import { freePort } from "../harness/haproxy.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-listen-"));

beforeAll(ensureBuilt);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function healthStatus(address: string): Promise<number | string> {
	return fetch(`http://${address}/healthz`).then(
		(r) => r.status,
		(e: Error) => (e.cause as NodeJS.ErrnoException | undefined)?.code ?? e.message,
	);
}

describe("run: listen from CERTIFICATEE_LISTEN", () => {
	it("serves on the variable's address when the file has no listen, and on the file's when it has one", async () => {
		const [fromEnv, fromFile] = [await freePort(), await freePort()];
		const noListen = join(dir, "no-listen.yaml");
		writeFileSync(noListen, "state_dir: state-a\ninterval: 1h\nsources:\n  - { name: ca, type: local-ca }\n");
		const a = spawnCertificatee(["run", "--config", noListen], {
			env: { CERTIFICATEE_LISTEN: `127.0.0.1:${fromEnv}` },
		});
		try {
			await a.waitForLog(/cycle finished/);
			expect(await healthStatus(`127.0.0.1:${fromEnv}`)).toBe(200);
		} finally {
			await a.stop();
		}
		const withListen = join(dir, "listen.yaml");
		writeFileSync(withListen, `state_dir: state-b\ninterval: 1h\nlisten: 127.0.0.1:${fromFile}\n`);
		const b = spawnCertificatee(["run", "--config", withListen], {
			env: { CERTIFICATEE_LISTEN: `127.0.0.1:${fromEnv}` },
		});
		try {
			await b.waitForLog(/cycle finished/);
			expect(await healthStatus(`127.0.0.1:${fromFile}`)).toBe(200);
			expect(await healthStatus(`127.0.0.1:${fromEnv}`)).toBe("ECONNREFUSED");
			// The image's HEALTHCHECK (`certificatee health`) asks where the daemon listens: the file's listen wins.
			const env = { CERTIFICATEE_LISTEN: `0.0.0.0:${fromEnv}` };
			const health = await certificatee(["health", "--config", withListen], { env });
			expect(health.code, health.stdout + health.stderr).toBe(0);
			expect(health.stdout).toContain(`http://127.0.0.1:${fromFile}/healthz: 200`);
			const ready = await certificatee(["health", "--ready", "--config", withListen], { env });
			expect(ready.stdout).toContain(`http://127.0.0.1:${fromFile}/readyz: `);
		} finally {
			await b.stop();
		}
		const down = await certificatee(["health", "--config", withListen]);
		expect(down.code).toBe(1);
		expect(down.stderr).toMatch(/NOT_AVAILABLE: no answer from http:\/\/127\.0\.0\.1:\d+\/healthz/);
		// Without a listen in the file, the variable's address, asked on loopback when it is 0.0.0.0.
		const a2 = spawnCertificatee(["run", "--config", noListen], {
			env: { CERTIFICATEE_LISTEN: `0.0.0.0:${fromEnv}` },
		});
		try {
			await a2.waitForLog(/cycle finished/);
			const viaEnv = await certificatee(["health", "--config", noListen], {
				env: { CERTIFICATEE_LISTEN: `0.0.0.0:${fromEnv}` },
			});
			expect(viaEnv.code, viaEnv.stdout + viaEnv.stderr).toBe(0);
			expect(viaEnv.stdout).toContain(`http://127.0.0.1:${fromEnv}/healthz: 200`);
		} finally {
			await a2.stop();
		}
	});
});
