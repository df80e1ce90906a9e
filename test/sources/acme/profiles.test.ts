/**
 * ACME profiles (draft-ietf-acme-profiles) against a real Pebble behind the recording pass-through, which
 * models what Pebble 2.4 lacks (test/harness/acme-observer.ts): Let's Encrypt's `meta.profiles`, `profile` in
 * newOrder and echoed in the order, `invalidProfile` for one the CA will not issue. Pebble issues 160-hour
 * certificates here, Let's Encrypt's `shortlived`.
 */
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CertificateeError } from "../../../src/errors.js";
import { runRenewal } from "../../../src/renewal/manager.js";
import { certificateSpecSchema } from "../../../src/renewal/schema.js";
import { createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { readCertificateRecord } from "../../../src/store/records.js";
import {
	type AcmeObserver,
	type AcmeObserverOptions,
	LETS_ENCRYPT_PROFILES,
	SHORTLIVED_SECONDS,
	startAcmeObserver,
} from "../../harness/acme-observer.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { pebbleConfig } from "./helpers.js";

let pebble: PebbleHandle;
let stateDir: string;
const closers: Array<() => Promise<void>> = [];
const signal = () => AbortSignal.timeout(30_000);
const req = { certificate: "edge", domains: ["edge.test"], keyType: "ecdsa-p256" as const };

beforeAll(async () => {
	pebble = await startPebble({ validation: "always-valid", certificateValidityPeriod: SHORTLIVED_SECONDS });
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-profiles-"));
});

afterAll(async () => {
	for (const close of closers.reverse()) await close();
	await pebble?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

async function through(options: AcmeObserverOptions, extra: Record<string, unknown> = {}) {
	const obs: AcmeObserver = await startAcmeObserver(pebble, options);
	closers.push(() => obs.close());
	const issuer = createAcmeIssuer(
		pebbleConfig(pebble, { directory_url: obs.directoryUrl, ca_file: obs.caFile, ...extra }),
		{ store: stateAt(path.join(stateDir, String(closers.length))) },
	);
	closers.push(() => issuer.close());
	return { obs, issuer };
}

async function failure(p: Promise<unknown>): Promise<CertificateeError> {
	const e = await p.then(
		() => undefined,
		(err: unknown) => err,
	);
	expect(e).toBeInstanceOf(CertificateeError);
	return e as CertificateeError;
}

describe("ACME profiles", () => {
	it("orders the certificate's profile, and reports the profile the CA echoed", async () => {
		const { obs, issuer } = await through({ profiles: LETS_ENCRYPT_PROFILES }, { profile: "classic" });
		const issued = await issuer.issue({ ...req, profile: "shortlived" }, signal());
		expect(obs.newOrders.at(-1)).toMatchObject({ profile: "shortlived" });
		expect(issued.profile).toBe("shortlived");
		const leaf = new X509Certificate(issued.certPem);
		expect(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom)).toBeLessThanOrEqual(
			SHORTLIVED_SECONDS * 1000,
		);
		// The order object the CA answered carried it (the proxy's echo), not only what was asked.
		const order = obs.posts.find((p) => p.status === 201 && p.response.includes('"finalize"'));
		expect(JSON.parse(order?.response ?? "{}").profile).toBe("shortlived");

		// Without a profile of its own, the issuer's default goes out.
		const byDefault = await issuer.issue(req, signal());
		expect(obs.newOrders.at(-1)).toMatchObject({ profile: "classic" });
		expect(byDefault.profile).toBe("classic");
	}, 60_000);

	it("sends no profile when none is configured", async () => {
		const { obs, issuer } = await through({ profiles: LETS_ENCRYPT_PROFILES });
		const issued = await issuer.issue(req, signal());
		expect(obs.newOrders).toHaveLength(1);
		expect(obs.newOrders[0]).not.toHaveProperty("profile");
		expect(issued.profile).toBeUndefined();
	}, 60_000);

	it("refuses a profile the directory does not list before ordering, naming the ones it does", async () => {
		const { obs, issuer } = await through({ profiles: LETS_ENCRYPT_PROFILES });
		const e = await failure(issuer.issue({ ...req, profile: "tlsclient" }, signal()));
		expect(e.code).toBe("CONFIG_INVALID");
		expect(e.retryable).toBe(false);
		expect(e.message).toContain(
			'ACME profile "tlsclient" of certificate "edge" is not offered by issuer "pebble"',
		);
		expect(e.message).toContain("it offers: classic, shortlived, tlsserver");
		expect(e.context.field).toBe("profile");
		expect(e.hint).toContain("one of: classic, shortlived, tlsserver");
		expect(obs.newOrders).toEqual([]);

		// The issuer's default is named as the issuer's field.
		const other = await through({ profiles: LETS_ENCRYPT_PROFILES }, { profile: "tlsclient" });
		const d = await failure(other.issuer.issue(req, signal()));
		expect(d.context.field).toBe("sources.pebble.profile");
	}, 60_000);

	it("refuses any profile when the CA lists none (Pebble 2.4 as it is)", async () => {
		const { obs, issuer } = await through({});
		const e = await failure(issuer.issue({ ...req, profile: "shortlived" }, signal()));
		expect(e.code).toBe("CONFIG_INVALID");
		expect(e.message).toContain("it lists no profiles in its directory");
		expect(e.hint).toContain("remove profile");
		expect(obs.newOrders).toEqual([]);
	}, 60_000);

	it("keeps the CA's invalidProfile problem when it refuses a listed profile, as a permanent failure", async () => {
		const { obs, issuer } = await through({ profiles: LETS_ENCRYPT_PROFILES, refuse: ["shortlived"] });
		const e = await failure(issuer.issue({ ...req, profile: "shortlived" }, signal()));
		expect(obs.refused).toHaveLength(1);
		expect(obs.refused[0]?.problem.type).toBe("urn:ietf:params:acme:error:invalidProfile");
		expect(e.code).toBe("ACME_ERROR");
		expect(e.context.problem).toBe("urn:ietf:params:acme:error:invalidProfile");
		expect(e.message).toContain('Account is not allowed to use profile "shortlived"');
		expect(e.retryable).toBe(false);
		expect(e.hint).toContain("it lists: classic, shortlived, tlsserver");
		// The nonce the proxy handed back kept the session working: the next order goes through.
		await expect(issuer.issue({ ...req, profile: "classic" }, signal())).resolves.toMatchObject({
			profile: "classic",
		});
	}, 60_000);

	it("stores the profile with the issued certificate and reports it in the renewal status, also when not due", async () => {
		const { issuer } = await through({ profiles: LETS_ENCRYPT_PROFILES });
		const store = stateAt(path.join(stateDir, "renewal"));
		const spec = certificateSpecSchema.parse({
			name: "edge",
			domains: ["edge.test"],
			issuer: "pebble",
			profile: "shortlived",
		});
		const deps = { store, issuers: new Map([["pebble", issuer]]), certificates: [spec] };
		const first = await runRenewal(deps, { now: new Date(), random: () => 0.5, signal: signal() });
		expect(first.statuses[0]).toMatchObject({ ordered: true, profile: "shortlived", state: "issued" });
		expect((await readCertificateRecord(store, "edge"))?.value.history[0]?.profile).toBe("shortlived");
		const again = await runRenewal(deps, { now: new Date(), random: () => 0.5, signal: signal() });
		expect(again.statuses[0]).toMatchObject({ ordered: false, profile: "shortlived" });
		// 160 h without ARI: the window opens at half of the lifetime (a lifetime under 10 days), the jitter
		// (0.5) moves renewAt by up to a third of it; a 1/3 window would leave at most 53 h.
		const notAfter = Date.parse(again.statuses[0]?.notAfter ?? "");
		const next = Date.parse(again.statuses[0]?.nextRenewalAt ?? "");
		const lifetime = SHORTLIVED_SECONDS * 1000;
		expect(notAfter - next).toBeLessThanOrEqual(lifetime / 2);
		expect(notAfter - next).toBeGreaterThan(lifetime / 3 + 60_000);
	}, 60_000);
});
