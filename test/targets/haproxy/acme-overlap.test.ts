import { describe, expect, it } from "vitest";
import { acmeOverlapWarnings } from "../../../src/targets/haproxy/acme-overlap.js";

describe("targets/haproxy: HAProxy's own ACME beside a configured certificate", () => {
	it("warns once per managed certificate and configured certificate that share names, case-insensitively", () => {
		const managed = [
			{ runtimeName: "@le/d", section: "LE", names: ["D.lay.test", "e.lay.test"] },
			{ runtimeName: "@le/other", section: "LE", names: ["other.test"] },
		];
		const certificates = [
			{ name: "d", domains: ["d.lay.test", "www.d.lay.test"] },
			{ name: "x", domains: ["x.test"] },
		];
		expect(acmeOverlapWarnings(managed, certificates)).toEqual([
			`certificate "d" (d.lay.test) is also managed by HAProxy's own ACME client: @le/d, acme section "LE"; certificatee never writes it (MANAGED_BY_HAPROXY_ACME). Keep one ACME client per certificate`,
		]);
		expect(acmeOverlapWarnings([], certificates)).toEqual([]);
	});
});
