import { beforeAll, describe, expect, it } from "vitest";
import { checkResponse } from "./check.js";
import { loadSpecValidator, type SpecValidator } from "./spec.js";

let spec: SpecValidator;
beforeAll(async () => {
	spec = await loadSpecValidator();
});

const json = { "Content-Type": "application/json", "Configuration-Version": "1" };
const op = (id: string) => {
	const o = spec.api.getOperation(id);
	if (!o) throw new Error(`no operation ${id}`);
	return o;
};

describe("test/harness/dpapi-double response check", () => {
	it("passes what a v3.4 server sends", () => {
		expect(
			checkResponse(spec, op("getOneStorageSSLCertificate"), 200, json, { storage_name: "a.pem", size: 3 }),
		).toEqual([]);
		expect(checkResponse(spec, op("createCert"), 201, { "Configuration-Version": "1" }, undefined)).toEqual(
			[],
		);
		expect(
			checkResponse(
				spec,
				op("deleteStorageSSLCertificate"),
				202,
				{ "Reload-ID": "2026-11-30-1", "Configuration-Version": "1" },
				undefined,
			),
		).toEqual([]);
		expect(checkResponse(spec, op("getCert"), 404, json, { code: 404, message: "x" })).toEqual([]);
	});

	it.each([
		[
			"a body of the wrong type",
			"getOneStorageSSLCertificate",
			200,
			json,
			{ storage_name: "a.pem", size: "big" },
			/size must be integer/,
		],
		["an error body without message", "getCert", 500, json, { code: 500 }, /message/],
		["a body where the spec declares none", "createCert", 201, json, { ok: true }, /declares no body/],
		[
			"a 202 without Reload-ID",
			"deleteStorageSSLCertificate",
			202,
			{ "Configuration-Version": "1" },
			undefined,
			/reload-id/,
		],
		[
			"an undeclared content type",
			"getAllCerts",
			200,
			{ ...json, "Content-Type": "text/html" },
			[],
			/content type/,
		],
	] as const)("flags %s", (_why, id, status, headers, body, problem) => {
		const problems = checkResponse(spec, op(id), status, { ...headers }, body);
		expect(problems.join("\n")).toMatch(problem);
	});
});
