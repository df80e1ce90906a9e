/**
 * Against a real Pebble seen through a recording pass-through on loopback (test/harness/acme-observer.ts):
 * a renewal's newOrder carries `replaces` = the ARI certID of the certificate it replaces (RFC 9773 §5) when the
 * directory advertises ARI, and none when it does not; a changed `email` is pushed to the existing account
 * (the same account URL, and Pebble then reports the new contact).
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ariCertId, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type AcmeObserver, startAcmeObserver } from "../../harness/acme-observer.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { pebbleConfig } from "./helpers.js";

let pebble: PebbleHandle;
let stateDir: string;
const closers: Array<() => Promise<void>> = [];
const signal = () => AbortSignal.timeout(30_000);

beforeAll(async () => {
	pebble = await startPebble({ validation: "always-valid" });
	stateDir = await mkdtemp(path.join(tmpdir(), "certificatee-acme-replaces-"));
});

afterAll(async () => {
	for (const close of closers) await close();
	await pebble?.stop();
	await rm(stateDir, { recursive: true, force: true });
});

async function observed(advertiseAri: boolean, email: string, dir: string) {
	const obs: AcmeObserver = await startAcmeObserver(pebble, { advertiseAri });
	closers.push(() => obs.close());
	const issuer = createAcmeIssuer(
		pebbleConfig(pebble, { directory_url: obs.directoryUrl, ca_file: obs.caFile, email }),
		{ store: stateAt(dir) },
	);
	closers.push(() => issuer.close());
	return { obs, issuer };
}

describe("ACME newOrder and account updates", () => {
	it("sends replaces with the old certificate's ARI certID when the CA advertises ARI, and not otherwise", async () => {
		const { obs, issuer } = await observed(true, "ops@example.com", path.join(stateDir, "a"));
		const req = { certificate: "web", domains: ["web.test"], keyType: "ecdsa-p256" as const };
		const first = await issuer.issue(req, signal());
		const second = await issuer.issue({ ...req, replaces: first.certPem }, signal());
		expect(second.certPem).not.toBe(first.certPem);
		expect(obs.newOrders).toHaveLength(2);
		expect(obs.newOrders[0]?.replaces).toBeUndefined();
		expect(obs.newOrders[1]?.replaces).toBe(ariCertId(first.certPem));

		const plain = await observed(false, "ops@example.com", path.join(stateDir, "b"));
		await plain.issuer.issue({ ...req, replaces: first.certPem }, signal());
		expect(plain.obs.newOrders).toHaveLength(1);
		expect(plain.obs.newOrders[0]).not.toHaveProperty("replaces");
	}, 60_000);

	it("pushes a changed email to the existing account", async () => {
		const dir = path.join(stateDir, "c");
		const obs = await startAcmeObserver(pebble);
		closers.push(() => obs.close());
		const issuerWith = (email: string) => {
			const issuer = createAcmeIssuer(
				pebbleConfig(pebble, { directory_url: obs.directoryUrl, ca_file: obs.caFile, email }),
				{ store: stateAt(dir) },
			);
			closers.push(() => issuer.close());
			return issuer;
		};
		const req = { certificate: "mail", domains: ["mail.test"], keyType: "ecdsa-p256" as const };
		await issuerWith("old@example.com").issue(req, signal());
		const file = path.join(dir, "accounts", "pebble.json");
		const stored = JSON.parse(await readFile(file, "utf8")).value;
		expect(stored.contact).toEqual(["mailto:old@example.com"]);

		const from = obs.posts.length;
		await issuerWith("new@example.com").issue(req, signal());
		const updated = JSON.parse(await readFile(file, "utf8")).value;
		expect(updated.accountUrl).toBe(stored.accountUrl);
		expect(updated.contact).toEqual(["mailto:new@example.com"]);
		// The update went to the account URL, and Pebble answered with the account holding the new contact.
		const update = obs.posts.slice(from).find((p) => p.path === new URL(stored.accountUrl).pathname);
		expect(update?.payload).toEqual({ contact: ["mailto:new@example.com"] });
		expect(update?.status).toBe(200);
		expect(JSON.parse(update?.response ?? "{}").contact).toEqual(["mailto:new@example.com"]);
		// Unchanged email: no further account update.
		const again = obs.posts.length;
		await issuerWith("new@example.com").issue(req, signal());
		expect(obs.posts.slice(again).filter((p) => p.path === new URL(stored.accountUrl).pathname)).toEqual([]);
	}, 60_000);
});
