/** The HTTP-01 responder on its own, and behind a real HAProxy that routes /.well-known/acme-challenge/ to it. */
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { createHttp01Responder } from "../../../src/sources/acme/http01.js";
import { createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { freePorts } from "../../harness/ports.js";
import { stateAt } from "../../harness/state.js";
import { expectValidIssue, pebbleConfig } from "./helpers.js";

let dir: string;

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-http01-"));
});

afterAll(async () => {
	await rm(dir, { recursive: true, force: true });
});

const get = async (url: string) => {
	const res = await fetch(url);
	return { status: res.status, body: await res.text() };
};

describe("HTTP-01 responder", () => {
	it("serves each token until it is removed, 404 for anything else, and listens only while tokens exist", async () => {
		const [port] = (await freePorts(1)) as [number];
		const responder = createHttp01Responder(`127.0.0.1:${port}`);
		const base = `http://127.0.0.1:${port}/.well-known/acme-challenge`;
		const removeA = await responder.publish("tokenA", "tokenA.thumb", "a.test", AbortSignal.timeout(5_000));
		const removeB = await responder.publish("tokenB", "tokenB.thumb", "a.test", AbortSignal.timeout(5_000));
		expect(await get(`${base}/tokenA`)).toEqual({ status: 200, body: "tokenA.thumb" });
		// Pebble fetches each token several times: it stays.
		expect(await get(`${base}/tokenA`)).toEqual({ status: 200, body: "tokenA.thumb" });
		expect((await get(`${base}/unknown`)).status).toBe(404);
		expect((await get(`http://127.0.0.1:${port}/other/tokenA`)).status).toBe(404);
		await removeA();
		expect((await get(`${base}/tokenA`)).status).toBe(404);
		expect(await get(`${base}/tokenB`)).toEqual({ status: 200, body: "tokenB.thumb" });
		await removeB();
		await expect(fetch(`${base}/tokenB`)).rejects.toThrow();
		const again = await responder.publish("tokenC", "tokenC.thumb", "a.test", AbortSignal.timeout(5_000));
		expect(await get(`${base}/tokenC`)).toEqual({ status: 200, body: "tokenC.thumb" });
		await again();
	});

	it("reports an address it cannot listen on as ISSUE_FAILED naming http01.listen", async () => {
		const blocker = net.createServer();
		await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
		const port = (blocker.address() as net.AddressInfo).port;
		try {
			const error = await createHttp01Responder(`127.0.0.1:${port}`)
				.publish("t", "t.k", "a.test", AbortSignal.timeout(5_000))
				.catch((e: unknown) => e);
			expect(isCertificateeError(error, "ISSUE_FAILED")).toBe(true);
			if (!isCertificateeError(error)) return;
			expect(error.message).toBe(`HTTP-01 responder cannot listen on 127.0.0.1:${port}: EADDRINUSE`);
			expect(error.context.field).toBe("http01.listen");
		} finally {
			await new Promise((r) => blocker.close(r));
		}
	});
});

describe("behind HAProxy", () => {
	let pebble: PebbleHandle;
	let haproxy: Haproxy | undefined;
	let responderPort: number;
	let reservation: net.Server | undefined;

	beforeAll(async () => {
		// Hold the responder's port while Pebble and HAProxy pick theirs, so neither can take it.
		reservation = net.createServer();
		await new Promise<void>((r) => reservation?.listen(0, "127.0.0.1", r));
		responderPort = (reservation.address() as net.AddressInfo).port;
		pebble = await startPebble({ validation: "real" });
		// The route docs/acme.md tells operators to add, on the port Pebble's VA connects to (80 in production).
		haproxy = await startHaproxy({
			extraConfig: `
frontend web
	bind 127.0.0.1:${pebble.httpPort}
	acl acme_challenge path_beg /.well-known/acme-challenge/
	use_backend certificatee_acme if acme_challenge
	default_backend site
backend certificatee_acme
	server certificatee 127.0.0.1:${responderPort}
backend site
	http-request return status 200 content-type text/plain string "site"
`,
		});
	});

	afterAll(async () => {
		if (reservation?.listening) await new Promise((r) => reservation?.close(r));
		await haproxy?.stop();
		await pebble?.stop();
	});

	it("Pebble validates through HAProxy's route to the responder", async () => {
		expect(await get(`http://127.0.0.1:${pebble.httpPort}/`)).toEqual({ status: 200, body: "site" });
		await new Promise((r) => reservation?.close(r));
		const acme = createAcmeIssuer(
			pebbleConfig(pebble, { http01: { listen: `127.0.0.1:${responderPort}` } }),
			{
				store: stateAt(dir),
			},
		);
		try {
			const issued = await acme.issue(
				{ certificate: "routed", domains: ["routed.test", "www.routed.test"], keyType: "ecdsa-p256" },
				AbortSignal.timeout(30_000),
			);
			expectValidIssue(issued, await pebble.root(), ["routed.test", "www.routed.test"]);
		} finally {
			await acme.close();
		}
	});
});
