/**
 * `validate --online` and ACME profiles: the directory's `meta.profiles` (modelled in front of a real Pebble
 * by test/harness/acme-observer.ts) is shown, and a configured profile the CA does not list fails the check,
 * naming the field and the profiles it offers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOnlineChecks } from "../../src/cli/commands/online.js";
import { parseConfig } from "../../src/config/load.js";
import { type AcmeObserver, LETS_ENCRYPT_PROFILES, startAcmeObserver } from "../harness/acme-observer.js";
import { type PebbleHandle, startPebble } from "../harness/pebble.js";

let pebble: PebbleHandle;
let modelled: AcmeObserver;

beforeAll(async () => {
	pebble = await startPebble({ validation: "always-valid" });
	modelled = await startAcmeObserver(pebble, { profiles: LETS_ENCRYPT_PROFILES });
});

afterAll(async () => {
	await modelled?.close();
	await pebble?.stop();
});

function config(profiles: { issuer?: string; certificate?: string }, plain = false) {
	const raw = {
		state_dir: "/nonexistent",
		sources: [
			{
				name: "le",
				type: "acme",
				directory_url: plain ? pebble.directoryUrl : modelled.directoryUrl,
				ca_file: plain ? pebble.caFile : modelled.caFile,
				...(profiles.issuer ? { profile: profiles.issuer } : {}),
			},
		],
		certificates: [
			{ name: "edge", domains: ["edge.test"], issuer: "le" },
			{
				name: "ip",
				domains: ["192.0.2.10"],
				issuer: "le",
				...(profiles.certificate ? { profile: profiles.certificate } : {}),
			},
		],
	};
	return parseConfig(raw, "x.yaml", { env: {} }).config;
}

describe("validate --online: ACME profiles", () => {
	it("lists the profiles the CA offers, and passes the configured ones", async () => {
		const [check] = await runOnlineChecks(config({ issuer: "classic", certificate: "shortlived" }), 10_000);
		expect(check?.ok).toBe(true);
		expect(check?.detail).toContain("profiles: classic, shortlived, tlsserver");
	});

	it("fails on a profile the CA does not list, naming the field and the offered profiles", async () => {
		const [check] = await runOnlineChecks(config({ certificate: "short" }), 10_000);
		expect(check?.ok).toBe(false);
		expect(check?.error?.code).toBe("CONFIG_INVALID");
		expect(check?.error?.message).toContain(
			'ACME profile "short" of certificate "ip" is not offered by issuer "le"',
		);
		expect(check?.error?.message).toContain("it offers: classic, shortlived, tlsserver");
		expect(check?.error?.hint).toContain(
			"set certificates[1].profile to one of: classic, shortlived, tlsserver",
		);
	});

	it("says when the CA lists no profiles (Pebble 2.4 itself), and fails a configured one", async () => {
		const [none] = await runOnlineChecks(config({}, true), 10_000);
		expect(none?.detail).toContain("profiles: none listed");
		const [wanted] = await runOnlineChecks(config({ issuer: "shortlived" }, true), 10_000);
		expect(wanted?.ok).toBe(false);
		expect(wanted?.error?.message).toContain("it lists no profiles in its directory");
		expect(wanted?.error?.hint).toContain("remove sources.le.profile");
	});
});
