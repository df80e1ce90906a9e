/**
 * `certificatee status` shows the ACME profile a certificate was issued under and its next attempt: a real
 * Pebble issuing 160-hour (`shortlived`) certificates behind the pass-through that models Let's Encrypt's
 * profiles (test/harness/acme-observer.ts), one `sync --once`, then `status` as text and JSON, through the
 * built CLI.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusSummary } from "../../src/metrics/status-view.js";
import {
	type AcmeObserver,
	LETS_ENCRYPT_PROFILES,
	SHORTLIVED_SECONDS,
	startAcmeObserver,
} from "../harness/acme-observer.js";
import { certificatee, ensureBuilt } from "../harness/cli.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";

let dir: string;
let pebble: PebbleHandle;
let observer: AcmeObserver;

beforeAll(async () => {
	[pebble] = await Promise.all([
		startPebble({ validation: "always-valid", certificateValidityPeriod: SHORTLIVED_SECONDS }),
		ensureBuilt(),
	]);
	observer = await startAcmeObserver(pebble, { profiles: LETS_ENCRYPT_PROFILES });
	dir = mkdtempSync(join(tmpdir(), "certificatee-status-profile-"));
}, 120_000);

afterAll(async () => {
	await observer?.close();
	await pebble?.stop();
	rmSync(dir, { recursive: true, force: true });
});

describe("cli/status: ACME profile", () => {
	it("shows the profile after the issuer, and the next attempt at half of the 160-hour lifetime", async () => {
		const out = join(dir, "out");
		mkdirSync(out, { recursive: true });
		const config = join(dir, "certificatee.yaml");
		writeFileSync(
			config,
			JSON.stringify({
				state_dir: join(dir, "state"),
				sources: [
					{
						name: "le",
						type: "acme",
						directory_url: observer.directoryUrl,
						ca_file: observer.caFile,
						poll_interval: "250ms",
					},
				],
				certificates: [{ name: "edge", domains: ["edge.test"], issuer: "le", profile: "shortlived" }],
				targets: [{ name: "files", type: "directory", path: out, layout: "kubernetes-tls" }],
			}),
		);
		const sync = await certificatee(["sync", "--once", "--config", config]);
		expect(sync.code, sync.stderr).toBe(0);
		expect(observer.newOrders.at(-1)).toMatchObject({ profile: "shortlived" });

		const text = await certificatee(["status", "--config", config]);
		expect(text.stdout).toMatch(/^edge\s+edge\.test\s+issuer le \(shortlived\)\s+/m);
		const json = await certificatee(["--json", "status", "--config", config]);
		const summary = (JSON.parse(json.stdout) as { summary: StatusSummary }).summary;
		const edge = summary.certificates.find((c) => c.name === "edge");
		expect(edge?.profile).toBe("shortlived");
		const left = Date.parse(edge?.notAfter ?? "") - Date.parse(edge?.nextAttempt ?? "");
		expect(left).toBeGreaterThan((SHORTLIVED_SECONDS * 1000) / 3);
		expect(left).toBeLessThanOrEqual((SHORTLIVED_SECONDS * 1000) / 2);
	}, 120_000);
});
