/**
 * `certificatee replace` without a daemon (one-shot syncs, each a fresh process): a directory source keeps the
 * 300-day certificate it served when an 80-day file replaces it (SOURCE_OLDER, exit 1, its hint naming the command), `replace` records the
 * 80-day one and syncs it into a directory target (exit 0, an audit line), and later syncs keep it. Bad use is
 * exit 1 with a clear error: no reason, an unknown name, an expired replacement.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestCa, issueTestLeaf, type TestIssuer, type TestLeaf } from "../harness/certs.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";

const DAY = 86_400_000;
let dir: string;
let config: string;
let ca: TestIssuer;
let long: TestLeaf;
let short: TestLeaf;
const source = () => join(dir, "source", "shop.pem");
const published = () => readFileSync(join(dir, "out", "shop.pem"), "utf8");

beforeAll(async () => {
	await ensureBuilt();
	dir = mkdtempSync(join(tmpdir(), "certificatee-replace-cli-"));
	ca = await createTestCa("replace CA");
	long = await issueTestLeaf(ca, { names: ["shop.test"], notAfter: new Date(Date.now() + 300 * DAY) });
	short = await issueTestLeaf(ca, { names: ["shop.test"], notAfter: new Date(Date.now() + 80 * DAY) });
	mkdirSync(join(dir, "source"));
	writeFileSync(source(), long.combinedPem, { mode: 0o600 });
	config = join(dir, "certificatee.yaml");
	writeFileSync(
		config,
		JSON.stringify({
			state_dir: join(dir, "state"),
			sources: [{ name: "files", type: "directory", path: join(dir, "source") }],
			targets: [{ name: "out", type: "directory", path: join(dir, "out"), layout: "haproxy-pem" }],
		}),
	);
}, 30_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sync = () => certificatee(["sync", "--once", "--config", config]);

describe("certificatee replace, no daemon", () => {
	it("an 80-day file is refused (SOURCE_OLDER) until replace records it; then it is synced and stays", async () => {
		expect((await sync()).code).toBe(0);
		expect(published()).toContain(long.certPem.trim());

		// Each sync is a fresh process: the source's memory in the state store says the 300-day one was served.
		writeFileSync(source(), short.combinedPem, { mode: 0o600 });
		const refused = await sync();
		expect(refused.code).toBe(1);
		expect(refused.stdout).toContain("before the certificate already served");
		expect(refused.stdout).toContain('certificatee replace shop --reason "…"');
		expect(published()).toContain(long.certPem.trim());

		const replace = await certificatee(["replace", "shop", "--reason", "CA change", "--config", config]);
		expect(replace.code, replace.stdout + replace.stderr).toBe(0);
		expect(replace.stdout).toContain(`shop: serial ${short.serial} (expires `);
		expect(replace.stdout).toContain(`replaces serial ${long.serial}`);
		expect(replace.stdout.trimEnd().split("\n").at(-1)).toBe("converged: 1 write done");
		const audit = replace.stderr
			.split("\n")
			.filter((l) => l.startsWith("{"))
			.map((l) => JSON.parse(l) as Record<string, unknown>)
			.find((l) => l.msg === "deliberate replacement recorded");
		expect(audit).toMatchObject({
			audit: "replacement",
			certificate: "shop",
			reason: "CA change",
			oldSerial: long.serial,
			newSerial: short.serial,
		});
		expect(published()).toContain(short.certPem.trim());

		// Later cycles keep it: nothing is refused, nothing reverts.
		const again = await sync();
		expect(again.code, again.stdout).toBe(0);
		expect(again.stdout.trimEnd().split("\n").at(-1)).toBe("converged: nothing to do");
		expect(published()).toContain(short.certPem.trim());
	});

	it("refuses bad use with exit 1 and says why", async () => {
		const noReason = await certificatee(["replace", "shop", "--config", config]);
		expect(noReason.code).toBe(1);
		expect(noReason.stderr).toContain("CONFIG_INVALID: replace shop: --reason is required");
		const unknown = await certificatee(["replace", "nope", "--reason", "x", "--config", config]);
		expect(unknown.code).toBe(1);
		expect(unknown.stderr).toContain('no certificate named "nope" to replace');
		const expired = await issueTestLeaf(ca, {
			names: ["shop.test"],
			notBefore: new Date(Date.now() - 20 * DAY),
			notAfter: new Date(Date.now() - DAY),
		});
		writeFileSync(join(dir, "expired.pem"), expired.certPem);
		const old = await certificatee([
			"replace",
			"shop",
			"--file",
			join(dir, "expired.pem"),
			"--reason",
			"x",
			"--config",
			config,
		]);
		expect(old.code).toBe(1);
		expect(old.stderr).toContain("BUNDLE_EXPIRED");
	});
});
