import { describe, expect, it } from "vitest";
import { dataplaneTargetSchema } from "../../../src/targets/haproxy-dataplane/schema.js";

const endpoint = {
	name: "haproxy-fra1",
	url: "https://10.0.0.5:5555",
	username: "admin",
	password: "s3cret",
};

describe("targets/haproxy-dataplane/schema", () => {
	it("accepts the documented example with defaults", () => {
		const t = dataplaneTargetSchema.parse({
			name: "fra-staging",
			type: "haproxy-dataplane",
			endpoints: [{ ...endpoint, ca_file: "/etc/ssl/dpapi-ca.pem", probe: "10.0.0.5:443" }],
		});
		expect(t.endpoints[0]).toMatchObject({
			timeout: 10_000,
			insecure_skip_verify: false,
			probe: "10.0.0.5:443",
		});
	});

	it("parses timeout as a duration", () => {
		const t = dataplaneTargetSchema.parse({
			name: "t",
			type: "haproxy-dataplane",
			endpoints: [{ ...endpoint, timeout: "1m30s" }],
		});
		expect(t.endpoints[0]?.timeout).toBe(90_000);
	});

	it.each([
		["an unknown key", { ...endpoint, passwd: "x" }],
		["a non-HTTP URL", { ...endpoint, url: "ftp://10.0.0.5" }],
		["a probe without port", { ...endpoint, probe: "10.0.0.5" }],
		["a bad timeout", { ...endpoint, timeout: "soon" }],
		["no password", { name: "x", url: "http://a:1", username: "u" }],
	])("rejects %s", (_why, e) => {
		expect(
			dataplaneTargetSchema.safeParse({ name: "t", type: "haproxy-dataplane", endpoints: [e] }).success,
		).toBe(false);
	});

	it("needs at least one endpoint", () => {
		expect(
			dataplaneTargetSchema.safeParse({ name: "t", type: "haproxy-dataplane", endpoints: [] }).success,
		).toBe(false);
	});
});
