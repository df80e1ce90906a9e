/**
 * The container image's default `listen` comes from CERTIFICATEE_LISTEN: the real daemon serves /healthz on
 * the address the variable names when the configuration leaves `listen` out, and on the file's own otherwise.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, spawnCertificatee } from "../harness/cli.js";
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
		} finally {
			await b.stop();
		}
	});
});
