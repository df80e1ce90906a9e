/**
 * HTTP-01 across a fleet: a real Pebble validates against 3 real HAProxy processes whose port-80 frontends
 * (127.0.0.2-4, one port) answer from a map with the rule of README "Challenges across a fleet"; challtestsrv
 * resolves each name to a node chosen at random; nothing else listens on that port. Pebble, its recording
 * pass-through and the fleet start once for the file.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TargetConfig, targetSchema } from "../../../src/config/schema.js";
import { isCertificateeError } from "../../../src/errors.js";
import { type AcmeIssuer, acmeSourceSchema, createAcmeIssuer } from "../../../src/sources/acme/index.js";
import { ensureMapFile } from "../../../src/targets/haproxy-runtime/challenge-map.js";
import { challengeMapNodes } from "../../../src/targets/registry.js";
import { type AcmeObserver, startAcmeObserver } from "../../harness/acme-observer.js";
import { ensureBuilt, spawnCertificatee } from "../../harness/cli.js";
import { type DpapiDouble, startDpapiDouble } from "../../harness/dpapi-double/index.js";
import { freePort, type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { assertConfigValid } from "../../harness/invariant.js";
import { type PebbleHandle, startPebble } from "../../harness/pebble.js";
import { stateAt } from "../../harness/state.js";
import { expectValidIssue } from "./helpers.js";

const NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"] as const;
const signal = () => AbortSignal.timeout(60_000);

/** The rule as README "Challenges across a fleet" documents it, verbatim but for the map's path. */
const documentedRule = (() => {
	const readme = readFileSync(path.join(import.meta.dirname, "../../../README.md"), "utf8");
	const line = readme
		.split("\n")
		.find((l) => /http-request return .*map\(\/etc\/haproxy\/acme\.map\)/.test(l));
	if (!line) throw new Error("README has no map rule for /etc/haproxy/acme.map");
	return line.trim();
})();
const rule = (map: string) => `    ${documentedRule.replaceAll("/etc/haproxy/acme.map", map)}`;

let pebble: PebbleHandle;
let observer: AcmeObserver;
let root: string;
let dir: string;
let map: string;
let port: number;
const fleet: Haproxy[] = [];
const doubles: DpapiDouble[] = [];
const issuers: AcmeIssuer[] = [];

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "certificatee-http01-map-"));
	// The API's maps_dir holds the map too, so both kinds name the same file.
	map = path.join(dir, "acme.map");
	await ensureMapFile(map, "test");
	port = await freePort();
	for (const ip of NODES) {
		fleet.push(
			await startHaproxy({
				extraConfig: [
					"frontend fe_http",
					`    bind ${ip}:${port}`,
					rule(map),
					"    http-request return status 404",
				].join("\n"),
			}),
		);
	}
	pebble = await startPebble({ validation: "real", httpPort: port });
	observer = await startAcmeObserver(pebble);
	root = await pebble.root();
}, 60_000);

afterAll(async () => {
	await Promise.all(issuers.map((i) => i.close()));
	await Promise.all(doubles.map((d) => d.close()));
	await observer?.close();
	await pebble?.stop();
	await Promise.all(fleet.map((h) => h.stop()));
	await rm(dir, { recursive: true, force: true });
});

function runtimeTargets(httpAddress = (i: number) => `${NODES[i]}:${port}`): TargetConfig[] {
	return fleet.map((h, i) =>
		targetSchema.parse({
			name: `node${i + 1}`,
			type: "haproxy-runtime",
			socket: h.adminSocket,
			crt_dir: h.crtDir,
			http_address: httpAddress(i),
		}),
	);
}

function issuer(name: string, targets: TargetConfig[]): AcmeIssuer {
	const config = acmeSourceSchema.parse({
		name,
		type: "acme",
		directory_url: observer.directoryUrl,
		ca_file: observer.caFile,
		http01: { via: "haproxy-map", targets: targets.map((t) => t.name), map, verify_timeout: "3s" },
		poll_interval: "250ms",
		timeout: "45s",
	});
	const created = createAcmeIssuer(config, {
		store: stateAt(path.join(dir, "state")),
		challengeMaps: (names, file) => challengeMapNodes(targets, names, file),
	});
	issuers.push(created);
	return created;
}

/** Each name resolves to one node: every node gets one, the rest are drawn at random. */
async function resolveAtRandom(names: string[]): Promise<Map<string, string>> {
	const order = [...NODES].sort(() => Math.random() - 0.5);
	const chosen = new Map<string, string>();
	for (const [i, name] of names.entries()) {
		const ip = order[i] ?? NODES[Math.floor(Math.random() * NODES.length)]!;
		chosen.set(name, ip);
		await pebble.challtestsrv!.addA(name, [ip]);
	}
	return chosen;
}

/** The map's entries in one node's memory (`show map`). */
async function entries(h: Haproxy): Promise<string[]> {
	const text = await h.command(`show map ${map}`);
	return text.split("\n").filter((l) => l.trim() !== "");
}

const challengePosts = () => observer.posts.filter((p) => /\/chal/.test(p.path) && p.payload !== "");

describe("HTTP-01 through HAProxy maps on a fleet of 3", () => {
	it("issues with each name validated on a random node; the maps are empty after and the file stays empty", async () => {
		const names = ["a.fleet.test", "b.fleet.test", "c.fleet.test", "d.fleet.test"];
		const chosen = await resolveAtRandom(names);
		const before = challengePosts().length;
		const issued = await issuer("fleet", runtimeTargets()).issue(
			{ certificate: "fleet", domains: names, keyType: "ecdsa-p256" },
			signal(),
		);
		expectValidIssue(issued, root, names);
		expect(challengePosts().length - before).toBe(names.length);
		expect(new Set(chosen.values()).size).toBe(3);
		for (const h of fleet) {
			expect(await entries(h)).toEqual([]);
			await assertConfigValid(h);
		}
		expect(await readFile(map, "utf8")).toBe("");
		expect((await stat(map)).mode & 0o777).toBe(0o644);
		// No responder anywhere else: the address every other name resolves to has nothing on the port.
		await expect(request(`http://127.0.0.1:${port}/.well-known/acme-challenge/x`)).rejects.toThrow();
	}, 90_000);

	it("issues for the nodes' IP addresses (RFC 8738): Pebble validates each IP on that node, through its map", async () => {
		const ips = [...NODES];
		const before = challengePosts().length;
		const issued = await issuer("fleet-ip", runtimeTargets()).issue(
			{ certificate: "fleet-ip", domains: ips, keyType: "ecdsa-p256" },
			signal(),
		);
		expectValidIssue(issued, root, []);
		expect(new X509Certificate(issued.certPem).subjectAltName).toBe(
			ips.map((ip) => `IP Address:${ip}`).join(", "),
		);
		expect(challengePosts().length - before).toBe(ips.length);
		const order = observer.newOrders.at(-1) as { identifiers: unknown[] };
		expect(order.identifiers).toEqual(ips.map((value) => ({ type: "ip", value })));
		for (const h of fleet) expect(await entries(h)).toEqual([]);
	}, 90_000);

	it("clears stale tokens left in the maps before publishing its first", async () => {
		await fleet[1]!.command(`add map ${map} stale-token stale-token.left-by-a-crash`);
		await fleet[2]!.command(`add map ${map} other-stale other-stale.value`);
		expect(await entries(fleet[1]!)).toHaveLength(1);
		const names = ["stale.fleet.test"];
		await resolveAtRandom(names);
		await issuer("fresh-start", runtimeTargets()).issue(
			{ certificate: "stale", domains: names, keyType: "ecdsa-p256" },
			signal(),
		);
		for (const h of fleet) expect(await entries(h)).toEqual([]);
	}, 90_000);

	it("a node that does not answer fails the order naming it; the CA is not asked and every token is removed", async () => {
		const dead = await freePort();
		const targets = runtimeTargets((i) => (i === 2 ? `${NODES[2]}:${dead}` : `${NODES[i]}:${port}`));
		const names = ["down.fleet.test"];
		await resolveAtRandom(names);
		const before = challengePosts().length;
		const error = await issuer("one-down", targets)
			.issue({ certificate: "down", domains: names, keyType: "ecdsa-p256" }, signal())
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "ISSUE_FAILED")).toBe(true);
		const message = (error as Error).message;
		expect(message).toContain(`node3: GET on ${NODES[2]}:${dead} failed: ECONNREFUSED`);
		expect(message).not.toContain("node1:");
		expect(message).toContain("the CA was not asked");
		expect(challengePosts().length).toBe(before);
		for (const h of fleet) expect(await entries(h)).toEqual([]);
	}, 90_000);

	it("a node whose HAProxy lacks the map is named with what to add to haproxy.cfg", async () => {
		const targets = runtimeTargets();
		const other = path.join(dir, "other.map");
		await writeFile(other, "");
		const config = acmeSourceSchema.parse({
			name: "wrong-map",
			type: "acme",
			directory_url: observer.directoryUrl,
			ca_file: observer.caFile,
			http01: { via: "haproxy-map", targets: ["node1"], map: other },
			poll_interval: "250ms",
		});
		const acme = createAcmeIssuer(config, {
			store: stateAt(path.join(dir, "state")),
			challengeMaps: (names, file) => challengeMapNodes(targets, names, file),
		});
		issuers.push(acme);
		await pebble.challtestsrv!.addA("wrong.fleet.test", [NODES[0]]);
		const before = challengePosts().length;
		const error = await acme
			.issue({ certificate: "wrong", domains: ["wrong.fleet.test"], keyType: "ecdsa-p256" }, signal())
			.catch((e: unknown) => e);
		expect(isCertificateeError(error, "ISSUE_FAILED")).toBe(true);
		expect((error as Error).message).toContain(
			`node1: clear map ${other} on node1 failed: Unknown map identifier`,
		);
		expect(challengePosts().length).toBe(before);
	}, 90_000);

	it("works the same through the Data Plane API's runtime map endpoints (the double over each node)", async () => {
		for (const h of fleet) doubles.push(await startDpapiDouble({ haproxy: h, mapsDir: dir }));
		const targets = [
			targetSchema.parse({
				name: "dpapi",
				type: "haproxy-dataplane",
				endpoints: doubles.map((d, i) => ({
					name: `n${i + 1}`,
					url: d.url,
					username: d.username,
					password: d.password,
					http_address: `${NODES[i]}:${port}`,
				})),
			}),
		];
		await fleet[0]!.command(`add map ${map} stale-api stale-api.value`);
		const names = ["x.api.test", "y.api.test", "z.api.test"];
		await resolveAtRandom(names);
		const issued = await issuer("api", targets).issue(
			{ certificate: "api", domains: names, keyType: "ecdsa-p256" },
			signal(),
		);
		expectValidIssue(issued, root, names);
		for (const h of fleet) expect(await entries(h)).toEqual([]);
		for (const d of doubles) {
			d.assertSpecClean();
			expect(d.count("clearRuntimeMap")).toBe(1);
			expect(d.count("addMapEntry")).toBe(names.length);
			expect(d.count("deleteRuntimeMapEntry")).toBe(names.length);
			// Never force_sync: no token reaches the file.
			expect(d.requests.filter((r) => /force_sync=true/.test(r.query))).toEqual([]);
		}
		expect(await readFile(map, "utf8")).toBe("");
	}, 90_000);
});

describe("at start", () => {
	it("the daemon clears tokens an earlier run left in every node's map, before any order", async () => {
		await ensureBuilt();
		for (const [i, h] of fleet.entries()) await h.command(`add map ${map} left-${i} left-${i}.by-a-kill`);
		const configFile = path.join(dir, "daemon.json");
		await writeFile(
			configFile,
			JSON.stringify({
				state_dir: path.join(dir, "daemon-state"),
				listen: `127.0.0.1:${await freePort()}`,
				interval: "1h",
				sources: [
					{
						name: "le",
						type: "acme",
						directory_url: observer.directoryUrl,
						ca_file: observer.caFile,
						http01: { via: "haproxy-map", targets: ["node1", "node2", "node3"], map },
					},
				],
				targets: fleet.map((h, i) => ({
					name: `node${i + 1}`,
					type: "haproxy-runtime",
					socket: h.adminSocket,
					crt_dir: h.crtDir,
					http_address: `${NODES[i]}:${port}`,
				})),
			}),
		);
		const daemon = spawnCertificatee(["run", "--config", configFile]);
		try {
			const line = await daemon.waitForLog(/^stale HTTP-01 tokens cleared/, { timeoutMs: 30_000 });
			expect(line.issuer).toBe("le");
			for (const h of fleet) expect(await entries(h)).toEqual([]);
		} finally {
			await daemon.stop();
		}
	}, 90_000);
});

describe("the map file", () => {
	it("is created empty with mode 0644 when missing, and an existing one is left as it is", async () => {
		const fresh = path.join(dir, "fresh.map");
		await ensureMapFile(fresh, "test");
		expect(await readFile(fresh, "utf8")).toBe("");
		expect((await stat(fresh)).mode & 0o777).toBe(0o644);
		await writeFile(fresh, "kept value\n");
		await ensureMapFile(fresh, "test");
		expect(await readFile(fresh, "utf8")).toBe("kept value\n");
	});
});
