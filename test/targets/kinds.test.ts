/**
 * One list of a configuration's endpoints (targets/kinds.ts, each kind's `endpoints`), read by `status` (its
 * progress count) and the cluster (what it shards). Before, two functions wrote it: `status` counted a directory
 * target as an endpoint, the cluster's list left it out, and neither was checked against what a cycle reports.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configSchema } from "../../src/config/schema.js";
import { sharedEndpoints } from "../../src/daemon/engine.js";
import { targetEndpoints } from "../../src/targets/kinds.js";
import { buildTarget } from "../../src/targets/registry.js";

const dir = mkdtempSync(join(tmpdir(), "target-kinds-"));
const config = configSchema.parse({
	targets: [
		{
			name: "lb",
			type: "haproxy-runtime",
			socket: join(dir, "no.sock"),
			crt_dir: join(dir, "crt"),
			timeout: "1s",
		},
		{
			name: "fra",
			type: "haproxy-dataplane",
			storage_dir: "/etc/haproxy/ssl",
			endpoints: [
				{ name: "fra1", url: "http://127.0.0.1:1", username: "admin", password: "secret" },
				{ name: "fra2", url: "http://127.0.0.1:1", username: "admin", password: "secret" },
			],
		},
		{ name: "files", type: "directory", path: join(dir, "out") },
	],
});

describe("targets/kinds: the endpoints of a configuration", () => {
	it("are the endpoints a cycle reports, named alike, unreachable ones included", async () => {
		const reported: string[] = [];
		for (const t of config.targets) {
			const target = buildTarget(t, { now: () => new Date(), haproxy: { backoff: false } });
			try {
				const report = await target.run([], "plan", AbortSignal.timeout(60_000));
				reported.push(...report.endpoints.map((e) => `${report.target}/${e.endpoint}`));
			} finally {
				await target.close();
			}
		}
		expect(targetEndpoints(config.targets).map((e) => `${e.target}/${e.endpoint}`)).toEqual(reported);
		expect(reported).toEqual(["lb/lb", "fra/fra1", "fra/fra2", `files/${join(dir, "out")}`]);
	});

	it("a cluster shards the HAProxy endpoints every member reaches, not a directory's (each member's own)", () => {
		// `status` counted 4 endpoints here and the cluster 3: both are now read from one list.
		expect(targetEndpoints(config.targets).map((e) => e.shared)).toEqual([true, true, true, false]);
		expect(sharedEndpoints(config)).toEqual([
			{ target: "lb", endpoint: "lb" },
			{ target: "fra", endpoint: "fra1" },
			{ target: "fra", endpoint: "fra2" },
		]);
	});
});
