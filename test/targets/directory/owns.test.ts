/**
 * A directory target gets the cluster's `owns` like every other target: an endpoint (its path) this member does
 * not own is left out of its cycle. In a cluster the engine's `owns` (memberOwns) says every member owns its
 * directory targets (files on its own machine: every member writes its own, docs/cluster.md), while a shared
 * HAProxy endpoint follows the cluster (the leader, or the shard owner).
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseBundle } from "../../../src/certificates/bundle.js";
import type { DesiredCertificate } from "../../../src/reconcile/model.js";
import { memberOwns, targetSchema } from "../../../src/targets/kinds.js";
import { buildTarget } from "../../../src/targets/registry.js";
import { createTestCa, issueTestLeaf } from "../../harness/certs.js";

const dir = mkdtempSync(join(tmpdir(), "directory-owns-"));
let desired: DesiredCertificate;

beforeAll(async () => {
	const ca = await createTestCa("dir owns root");
	const leaf = await issueTestLeaf(ca, { names: ["files.example"] });
	desired = {
		name: "files",
		names: ["files.example"],
		bundle: parseBundle({ cert: leaf.certPem, chain: leaf.chainPem, key: leaf.keyPem }, { source: "test" }),
		origin: "test",
	};
});

const signal = new AbortController().signal;

describe("directory target: the cluster's owns", () => {
	it("an endpoint this member does not own is left out of its cycle: nothing written, no endpoint report", async () => {
		const path = join(dir, "not-owned");
		const asked: string[] = [];
		const target = buildTarget(targetSchema.parse({ name: "files", type: "directory", path }), {
			now: () => new Date(),
			owns: (t, e) => {
				asked.push(`${t} ${e}`);
				return false;
			},
		});
		const report = await target.run([desired], "sync", signal);
		expect(asked).toEqual([`files ${path}`]);
		expect(report).toEqual({ target: "files", kind: "directory", endpoints: [] });
		expect(existsSync(path)).toBe(false);
	});

	it("in a cluster every member owns its directory targets, whoever owns the HAProxy endpoints", async () => {
		const path = join(dir, "member-local");
		const configs = [
			targetSchema.parse({ name: "files", type: "directory", path }),
			targetSchema.parse({ name: "lb", type: "haproxy-runtime", socket: "/run/h.sock", crt_dir: "/etc/h" }),
		];
		// A member that leads nothing and owns no shard.
		const owns = memberOwns(configs, () => false);
		expect([owns("files", path), owns("lb", "lb")]).toEqual([true, false]);
		expect(memberOwns(configs, () => true)("lb", "lb")).toBe(true);
		const target = buildTarget(configs[0]!, { now: () => new Date(), owns });
		const report = await target.run([desired], "sync", signal);
		expect(report.endpoints.map((e) => [e.endpoint, e.ok, e.steps.map((s) => s.result)])).toEqual([
			[path, true, ["ok"]],
		]);
		expect(existsSync(join(path, "files", "tls.crt"))).toBe(true);
	});
});
