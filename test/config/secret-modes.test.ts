/**
 * Issue 25, finding 12: secret files another account can read are refused, as ssh refuses such a key
 * (`chmod 600`, named in the error); a pre-existing state_dir others can write is refused, one they can only
 * read is warned about at start. Real files with real modes and owners (the suite runs as root, so a file of
 * another uid is a real chown).
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { loadEncryptionKey } from "../../src/cluster/encryption.js";
import { parseConfig } from "../../src/config/load.js";
import { buildEngine } from "../../src/daemon/engine.js";
import { CertificateeError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import { readTsigSecret } from "../../src/sources/acme/rfc2136.js";
import { checkStateDir } from "../../src/store/state-dir.js";

const dir = mkdtempSync(join(tmpdir(), "certificatee-secret-modes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

function secret(content: string, mode: number, uid?: number): string {
	const file = join(dir, `secret-${++n}`);
	writeFileSync(file, content, { mode: 0o600 });
	chmodSync(file, mode);
	if (uid !== undefined) chownSync(file, uid, 0);
	return file;
}

function thrown(work: () => unknown): CertificateeError {
	try {
		work();
	} catch (e) {
		if (e instanceof CertificateeError) return e;
		throw e;
	}
	throw new Error("expected an error");
}

const ENC = Buffer.alloc(32, 9).toString("base64");
const TSIG = Buffer.alloc(32, 3).toString("base64");
const TOKEN = "0123456789abcdef0123456789abcdef";

/** Each kind of secret file, read by its own reader. */
const kinds: Array<{ kind: string; content: string; read: (file: string) => unknown }> = [
	{
		kind: "password_file",
		content: "dpapi-pw\n",
		read: (file) =>
			parseConfig(
				{
					targets: [
						{
							name: "d",
							type: "haproxy-dataplane",
							endpoints: [{ name: "e", url: "http://h:1", username: "u", password_file: file }],
						},
					],
				},
				join(dir, "c.yaml"),
				{ env: {} },
			),
	},
	{
		kind: "listen_token_file",
		content: `${TOKEN}\n`,
		read: (file) => parseConfig({ listen_token_file: file }, join(dir, "c.yaml"), { env: {} }),
	},
	{ kind: "tsig_secret_file", content: `${TSIG}\n`, read: (file) => readTsigSecret(file) },
	{ kind: "encryption_key_file", content: `${ENC}\n`, read: (file) => loadEncryptionKey(file, {}) },
];

describe("secret files", () => {
	for (const { kind, content, read } of kinds) {
		it(`${kind}: 0644 and 0640 of our own are refused naming the file and chmod 600; 0600, 0400 and root:group 0640 of another owner are read`, () => {
			for (const mode of [0o644, 0o640, 0o604]) {
				const file = secret(content, mode);
				const error = thrown(() => read(file));
				expect(error.message, `${kind} ${mode.toString(8)}`).toContain(file);
				expect(error.message).toContain(`chmod 600 ${file}`);
				expect(error.message).toMatch(
					/accessible to (its group|other accounts) \(mode 06[0-9]4?\)|accessible to/,
				);
				expect(error.message).not.toContain(content.trim());
				if (kind === "tsig_secret_file" || kind === "encryption_key_file") {
					expect(error.code).toBe("CONFIG_SECRET_EXPOSED");
					expect(error.hint).toMatch(/chmod 600/);
				}
			}
			for (const mode of [0o600, 0o400]) expect(() => read(secret(content, mode))).not.toThrow();
			// Handed to certificatee's group by another owner (root:certificatee 0640, Kubernetes' fsGroup).
			expect(() => read(secret(content, 0o640, 4242))).not.toThrow();
			// But never to every account, whoever owns it.
			expect(() => read(secret(content, 0o644, 4242))).toThrow(/accessible to other accounts \(mode 0644\)/);
		});
	}
});

describe("a pre-existing state_dir", () => {
	function stateDir(mode: number): string {
		const path = join(dir, `state-${++n}`);
		mkdirSync(path);
		chmodSync(path, mode);
		return path;
	}

	it("writable by its group or every account: refused (STATE_EXPOSED); readable: a warning; 0700: nothing", () => {
		for (const mode of [0o777, 0o1777, 0o770, 0o730]) {
			const path = stateDir(mode);
			const error = thrown(() => checkStateDir(path));
			expect(error.code).toBe("STATE_EXPOSED");
			expect(error.message).toMatch(
				new RegExp(`^state_dir ${path} is writable by (every account|its group)`),
			);
			expect(error.hint).toBe(
				`chmod 700 ${path} (certificatee creates it 0700 itself when it does not exist)`,
			);
		}
		expect(checkStateDir(stateDir(0o755)).warning).toMatch(
			/readable by other accounts \(mode 0755\).*chmod 700/,
		);
		expect(checkStateDir(stateDir(0o750)).warning).toMatch(/mode 0750/);
		expect(checkStateDir(stateDir(0o700))).toEqual({});
		expect(checkStateDir(join(dir, "not-there"))).toEqual({});
	});

	it("the engine refuses a world-writable state_dir before opening it, and logs the warning for a readable one", async () => {
		const lines: string[] = [];
		const log = createLogger({
			level: "info",
			destination: new Writable({
				write(chunk, _enc, done) {
					lines.push(String(chunk));
					done();
				},
			}),
		});
		const open = stateDir(0o777);
		const config = (state_dir: string) => parseConfig({ state_dir }, join(dir, "c.yaml"), { env: {} }).config;
		await expect(buildEngine(config(open), { log, readOnly: false })).rejects.toMatchObject({
			code: "STATE_EXPOSED",
		});
		const readable = stateDir(0o755);
		const engine = await buildEngine(config(readable), { log, readOnly: false });
		await engine.close();
		const warned = lines.map((l) => JSON.parse(l)).find((l) => l.state_dir === readable);
		expect(warned?.level).toBe(40);
		expect(warned?.msg).toMatch(/readable by other accounts \(mode 0755\)/);
	});
});
