/**
 * classify + plan with crt-list files (issue 11 item 1): a file HAProxy re-reads at reload is edited before
 * memory and before the certificate file when the target can edit it, and otherwise pins the duplicate with
 * the exact line to remove. Pure: plain data in, steps and verdicts out.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { DesiredCertificate } from "../../../../src/reconcile/model.js";
import { classifyEndpoint } from "../../../../src/targets/haproxy/engine/classify.js";
import type { ObservedCrtList, ObservedRef } from "../../../../src/targets/haproxy/engine/model.js";
import { planEndpoint } from "../../../../src/targets/haproxy/engine/plan.js";
import { desiredCert, metaOf, oldMeta, ref, removePolicy } from "../../../reconcile/scenario.js";

const LIST = "/etc/haproxy/certs.list";
const DUP = "/etc/haproxy/ssl/legacy_barsone.pem";
let keeper: DesiredCertificate;

beforeAll(async () => {
	keeper = await desiredCert("barsone", ["barsone.test", "www.barsone.test"]);
});

function run(refs: ObservedRef[], crtLists: ObservedCrtList[], newCertificateCrtList = LIST) {
	const desired = [{ ref: "barsone.pem", certificate: keeper }];
	const verdicts = classifyEndpoint({ desired, refs, policy: removePolicy, crtLists });
	const plan = planEndpoint({
		verdicts,
		desired: new Map([[keeper.name, keeper]]),
		refs: new Map(refs.map((r) => [r.ref, r])),
		runtimeNameFor: (r) => `/etc/haproxy/ssl/${r}`,
		newCertificateCrtList,
		legacyDuplicates: "remove",
		crtLists: new Map(crtLists.map((l) => [l.name, l])),
	});
	return { verdicts, ops: plan.steps.map((s) => `${s.action.op} ${s.action.ref}`), notes: plan.notes };
}

const stableKeeper = () => ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper) });
const fileList = (editable: boolean, lines: Record<string, string[]> = {}): ObservedCrtList => ({
	name: LIST,
	kind: "file",
	editable,
	lines,
});

describe("haproxy engine: plan with crt-list files", () => {
	it("an editable file: its lines go first, then memory, then the certificate file", () => {
		const r = run(
			[
				// Stable: the keeper is in every list the duplicate is in.
				ref("barsone.pem", { storage: metaOf(keeper), runtime: metaOf(keeper), crtLists: [LIST] }),
				ref("legacy_barsone.pem", {
					storage: oldMeta(keeper.names),
					runtime: oldMeta(keeper.names),
					crtLists: [LIST],
				}),
			],
			[fileList(true, { [DUP]: [`${DUP} [alpn h2] barsone.test`] })],
		);
		expect(r.ops).toEqual([
			"crt-list-file-remove legacy_barsone.pem",
			"crt-list-remove legacy_barsone.pem",
			"runtime-delete legacy_barsone.pem",
			"storage-delete legacy_barsone.pem",
		]);
	});

	it("a crt directory is not a file: memory only, as before", () => {
		const r = run(
			[
				stableKeeper(),
				ref("legacy_barsone.pem", { storage: oldMeta(keeper.names), runtime: oldMeta(keeper.names) }),
			],
			[{ name: "/etc/haproxy/ssl", kind: "directory", editable: false }],
		);
		expect(r.ops).toEqual([
			"crt-list-remove legacy_barsone.pem",
			"runtime-delete legacy_barsone.pem",
			"storage-delete legacy_barsone.pem",
		]);
	});

	it("a storage-only duplicate still named by an editable file: the line goes before the file", () => {
		const r = run(
			[stableKeeper(), ref("legacy_barsone.pem", { storage: oldMeta(keeper.names) })],
			[fileList(true, { [DUP]: [DUP] })],
		);
		expect(r.ops).toEqual(["crt-list-file-remove legacy_barsone.pem", "storage-delete legacy_barsone.pem"]);
	});

	it("a file the target cannot edit pins the duplicate with the exact line; it is kept current, never deleted", () => {
		const line = `${DUP} [alpn h2] barsone.test`;
		const r = run(
			[
				stableKeeper(),
				ref("legacy_barsone.pem", {
					storage: oldMeta(keeper.names),
					runtime: metaOf(keeper),
					crtLists: [LIST],
				}),
			],
			[fileList(false, { [DUP]: [line] })],
		);
		const v = r.verdicts.find((x) => x.class === "pinned");
		expect(v).toMatchObject({
			ref: "legacy_barsone.pem",
			pendingChange: { file: LIST, removeLines: [line] },
		});
		expect(v?.class === "pinned" && v.why).toContain(`"${line}"`);
		expect(r.ops).toEqual(["storage-replace legacy_barsone.pem"]);
	});

	it("a new certificate: storage, then a line in the editable file, then memory", () => {
		expect(run([], [fileList(true)]).ops).toEqual([
			"storage-create barsone.pem",
			"crt-list-file-add barsone.pem",
			"runtime-add barsone.pem",
		]);
	});

	it("a new certificate into a file the target cannot edit: written to storage only, the line reported as pending (a runtime-only add would be lost at the next reload)", () => {
		const r = run([], [fileList(false)]);
		expect(r.ops).toEqual(["storage-create barsone.pem"]);
		expect(r.notes).toEqual([
			`barsone.pem: written to storage, not made live: pending a configuration change: add the line "/etc/haproxy/ssl/barsone.pem" to the crt-list file ${LIST}, then reload (a runtime-only add would be lost at the next reload)`,
		]);
	});

	it("a new certificate into a file the target cannot edit, its directory a crt directory: added in memory, a reload serves it from the directory", () => {
		const r = run([], [fileList(false), { name: "/etc/haproxy/ssl", kind: "directory", editable: false }]);
		expect(r.ops).toEqual(["storage-create barsone.pem", "runtime-add barsone.pem"]);
		expect(r.notes[0]).toMatch(/after a reload HAProxy serves it from the crt directory \/etc\/haproxy\/ssl/);
	});
});
