/**
 * End to end: the renewal manager orders through the ACME issuer from a real Pebble (real HTTP-01, 60 s
 * certificates), stores what it got, orders nothing while not due, renews when due, and backs off after a
 * rejected order while nothing else changes.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RenewalDeps, type RenewalReport, runRenewal } from "../../../src/renewal/manager.js";
import { certificateSpecSchema } from "../../../src/renewal/schema.js";
import { type AcmeIssuer, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type FileStore, openFileStore } from "../../../src/store/file-store.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { pebbleConfig } from "./helpers.js";

let pebble: PebbleHandle;
let dir: string;
let store: FileStore;
let acme: AcmeIssuer;

beforeAll(async () => {
	pebble = await startPebble({
		validation: "real",
		certificateValidityPeriod: 60,
		domainBlocklist: ["blocked.test"],
	});
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-renewal-"));
	store = await openFileStore(path.join(dir, "state"));
	acme = createAcmeIssuer(pebbleConfig(pebble), { store });
});

afterAll(async () => {
	await acme?.close();
	store?.close();
	await pebble?.stop();
	await rm(dir, { recursive: true, force: true });
});

const web = certificateSpecSchema.parse({
	name: "web",
	domains: ["web.test", "www.web.test"],
	issuer: "pebble",
});
const blocked = certificateSpecSchema.parse({ name: "blocked", domains: ["blocked.test"], issuer: "pebble" });

function deps(certificates = [web]): RenewalDeps {
	return { store, issuers: new Map([["pebble", acme]]), certificates };
}

/**
 * Pebble sets notBefore to the second it signs (Let's Encrypt backdates by an hour); the certificate model
 * tolerates 5 minutes of notBefore skew, so a cycle that starts just before issuance accepts the result.
 */
const soon = () => new Date();

const cycle = (d: RenewalDeps, now: Date): Promise<RenewalReport> =>
	runRenewal(d, { now, random: () => 0.5, signal: AbortSignal.timeout(30_000) });
const statusOf = (r: RenewalReport, name = "web") => r.statuses.find((s) => s.name === name)!;
const leafOf = (r: RenewalReport, name = "web") => r.certificates.find((c) => c.name === name)?.bundle.leaf;

describe("ACME issuance and renewal through the renewal manager", () => {
	it("issues, orders nothing while not due, and renews before the end of a 60 s lifetime", async () => {
		const now = soon();
		const first = await cycle(deps(), now);
		expect(statusOf(first).lastError).toBeUndefined();
		expect(statusOf(first)).toMatchObject({ ordered: true, failures: 0 });
		const leaf = leafOf(first)!;
		expect(leaf.dnsNames).toEqual(["web.test", "www.web.test"]);
		expect(leaf.notAfter.getTime() - leaf.notBefore.getTime()).toBeLessThanOrEqual(61_000);

		const idle = await cycle(deps(), new Date(now.getTime() + 1000));
		expect(statusOf(idle).ordered).toBe(false);
		expect(leafOf(idle)?.serial).toBe(leaf.serial);

		// Time is an input: jump to 5 s before expiry, well inside the last third of the lifetime.
		const renewed = await cycle(deps(), new Date(leaf.notAfter.getTime() - 5000));
		expect(statusOf(renewed).ordered).toBe(true);
		expect(leafOf(renewed)?.serial).not.toBe(leaf.serial);
		expect(leafOf(renewed)?.dnsNames).toEqual(["web.test", "www.web.test"]);
	});

	it("a rejected order (permanent) is reported with the ACME problem, needs a human, backs off 1 h, and leaves other certificates alone", async () => {
		const now = soon();
		const first = await cycle(deps([web, blocked]), now);
		const failed = statusOf(first, "blocked");
		expect(failed.ordered).toBe(true);
		expect(failed.failures).toBe(1);
		expect(failed.lastError?.code).toBe("ACME_ERROR");
		expect(failed.lastError?.message).toContain("urn:ietf:params:acme:error:rejectedIdentifier");
		expect(leafOf(first, "blocked")).toBeUndefined();
		expect(leafOf(first, "web")).toBeDefined();

		// rejectedIdentifier is permanent (retryable false): it needs a human and backs off to the cap (1 h) at once,
		// not the 1 min of a first transient failure.
		expect(failed.lastError?.retryable).toBe(false);
		expect(Date.parse(failed.nextRenewalAt) - now.getTime()).toBe(60 * 60_000);
		expect(failed.state).toBe("backing-off");
		expect(failed.decision.message).toMatch(/^needs a human: /);

		const later = await cycle(deps([web, blocked]), new Date(now.getTime() + 1000));
		expect(statusOf(later, "blocked").ordered).toBe(false);
		expect(statusOf(later, "web").ordered).toBe(false);
		// Past a transient failure's 1 min backoff, still waiting.
		const stillWaiting = await cycle(deps([blocked]), new Date(now.getTime() + 2 * 60_000));
		expect(statusOf(stillWaiting, "blocked").ordered).toBe(false);
		expect(statusOf(stillWaiting, "blocked").decision.reason).toBe("Backoff");
	});
});
