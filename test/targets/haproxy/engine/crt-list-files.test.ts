/**
 * crt-list files on a real HAProxy (issue 11 item 1). `add`/`del ssl crt-list` change memory only and a
 * reload re-reads the file: the runtime target edits the file (every other byte kept), the dataplane target,
 * which cannot edit it without a reload, never deletes a storage file the file names and reports the line
 * to remove. Each test ends with the reload-safety invariant.
 */
import { existsSync } from "node:fs";
import { chmod, chown, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { normaliseSerial } from "../../../../src/certificates/index.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../../harness/certs.js";
import { assertConfigValid, assertReloadSafe } from "../../../harness/invariant.js";
import {
	syncOnce as cycle,
	rig,
	servedSerial as served,
	okWrites as writes,
} from "../../../harness/targets.js";
import { desiredFromLeaf as desired } from "../../../reconcile/scenario.js";

let ca: TestIssuer;
const r = rig();

beforeAll(async () => {
	ca = await createTestCa("crt-list files CA");
});

/**
 * HAProxy with a crt-list file written the way operators write them (comments, blank lines, options,
 * SNI filters, a negative filter), its certificates in `<dir>/list/`; reloaded so HAProxy reads that text.
 */
async function withCrtListFile(pems: Record<string, string>, lines: (list: string) => string) {
	const h = await r.haproxy({
		crtList: Object.entries(pems).map(([file, pem]) => ({ file, pem })),
	});
	const listDir = join(h.dir, "list");
	const text = lines(listDir);
	await writeFile(h.crtListPath, text);
	await h.reload();
	return { h, listDir, text };
}

describe("crt-list files (haproxy-runtime target)", () => {
	it("a duplicate's line is removed and a new certificate's line appended, every other byte kept, reload-safe", async () => {
		const names = ["barsone.test", "www.barsone.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const other = await issueTestLeaf(ca, { names: ["other.test", "www.other.test"] });
		const fresh = await issueTestLeaf(ca, { names: ["fresh.test"] });
		const { h, listDir, text } = await withCrtListFile(
			{
				"barsone.pem": keeper.combinedPem,
				"legacy_barsone.pem": legacy.combinedPem,
				"other.pem": other.combinedPem,
			},
			(d) =>
				[
					"# edge certificates, managed in part by certificatee",
					`${d}/barsone.pem [alpn h2,http/1.1 ssl-min-ver TLSv1.2] barsone.test www.barsone.test`,
					"",
					"# the legacy copy below predates certificatee",
					`${d}/legacy_barsone.pem [alpn h2] barsone.test www.barsone.test`,
					`${d}/other.pem    [ssl-min-ver TLSv1.2]   *.other.test other.test !www.other.test`,
					"# end",
					"",
				].join("\n"),
		);
		const t = r.runtime(h, { crt_dir: listDir, crt_list: h.crtListPath });
		const pid = await h.workerPid();
		const want = [desired("barsone", keeper, names), desired("fresh", fresh, ["fresh.test"])];
		// The file keeps its mode, and its owner when certificatee may keep it (as root).
		const owner = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;
		if (owner) await chown(h.crtListPath, owner.uid, owner.gid);
		await chmod(h.crtListPath, 0o640);

		const first = await cycle(t, want);
		expect(first.ok).toBe(true);
		expect(writes(first)).toEqual([
			"storage-create fresh.pem",
			"crt-list-file-add fresh.pem",
			"runtime-add fresh.pem",
			"crt-list-file-remove legacy_barsone.pem",
			"crt-list-remove legacy_barsone.pem",
			"runtime-delete legacy_barsone.pem",
			"storage-delete legacy_barsone.pem",
		]);
		const legacyLine = `${listDir}/legacy_barsone.pem [alpn h2] barsone.test www.barsone.test\n`;
		expect(await readFile(h.crtListPath, "utf8")).toBe(
			`${text.replace(legacyLine, "")}${listDir}/fresh.pem\n`,
		);
		expect(existsSync(join(listDir, "legacy_barsone.pem"))).toBe(false);
		const after = await stat(h.crtListPath);
		expect(after.mode & 0o777).toBe(0o640);
		if (owner) expect({ uid: after.uid, gid: after.gid }).toEqual(owner);
		expect(await served(h, "fresh.test")).toBe(normaliseSerial(fresh.serial));
		for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(keeper.serial));

		const second = await cycle(t, want);
		expect(second.steps).toEqual([]);
		expect(await h.workerPid()).toBe(pid);
		await assertReloadSafe(h, { names: ["fresh.test", "other.test", ...names] });
		// After the reload the file alone says what HAProxy loads: still converged, nothing to write.
		expect((await cycle(t, want)).steps).toEqual([]);
	});
});

describe("crt-list files (haproxy-runtime target): repairing an older tool's damage", () => {
	it("a duplicate unlinked while the crt-list file still names it: the line goes, and reloads work again", async () => {
		const names = ["mend.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, listDir } = await withCrtListFile(
			{ "mend.pem": keeper.combinedPem, "legacy_mend.pem": legacy.combinedPem },
			(d) => [`${d}/mend.pem mend.test`, `${d}/legacy_mend.pem [alpn h2] mend.test`, "# tail", ""].join("\n"),
		);
		// What the storage-only delete of earlier versions did: the file is gone, the list still names it.
		await rm(join(listDir, "legacy_mend.pem"));
		await expect(assertConfigValid(h)).rejects.toThrow(/haproxy -c .* failed/);
		const t = r.runtime(h, { crt_dir: listDir, crt_list: h.crtListPath });

		const first = await cycle(t, [desired("mend", keeper, names)]);
		expect(first.verdicts).toContainEqual(
			expect.objectContaining({
				class: "deleted-pending-reload",
				ref: "legacy_mend.pem",
				keeperStable: true,
			}),
		);
		expect(writes(first)).toEqual([
			"crt-list-file-remove legacy_mend.pem",
			"crt-list-remove legacy_mend.pem",
			"runtime-delete legacy_mend.pem",
		]);
		expect(await readFile(h.crtListPath, "utf8")).toBe(`${listDir}/mend.pem mend.test\n# tail\n`);
		expect(await served(h, "mend.test")).toBe(normaliseSerial(keeper.serial));
		await assertReloadSafe(h, { names });
	});
});

describe("crt-list files (haproxy-dataplane target)", () => {
	it("a duplicate a crt-list file names keeps its storage file, kept current; the exact line is reported; reload-safe", async () => {
		const names = ["dp.test", "www.dp.test"];
		const keeper = await issueTestLeaf(ca, { names });
		const legacy = await issueTestLeaf(ca, { names });
		const { h, listDir, text } = await withCrtListFile(
			{ "dp.pem": keeper.combinedPem, "legacy_dp.pem": legacy.combinedPem },
			(d) =>
				[
					"# fleet list",
					`${d}/dp.pem [alpn h2] dp.test www.dp.test`,
					"",
					`${d}/legacy_dp.pem [alpn h2] dp.test www.dp.test`,
					"",
				].join("\n"),
		);
		const d = await r.dpapi(h, { storageDir: listDir });
		const t = r.dataplane(h, d, { storage_dir: listDir, crt_list: h.crtListPath });
		const pid = await h.workerPid();
		const want = [desired("dp", keeper, names)];
		const line = `${listDir}/legacy_dp.pem [alpn h2] dp.test www.dp.test`;

		const first = await cycle(t, want);
		expect(first.ok).toBe(true);
		const pinned = first.verdicts.find((v) => v.class === "pinned");
		expect(pinned).toMatchObject({
			ref: "legacy_dp.pem",
			keeper: "dp.pem",
			pendingChange: { file: h.crtListPath, removeLines: [line] },
		});
		expect(text.split("\n")).toContain(line);
		// Kept current, so whichever of the two a reload serves first is the keeper's certificate.
		expect(writes(first)).toEqual(["storage-replace legacy_dp.pem", "runtime-set legacy_dp.pem"]);
		expect(d.requests.filter((r) => r.method === "delete")).toEqual([]);
		expect(existsSync(join(listDir, "legacy_dp.pem"))).toBe(true);
		expect(await readFile(h.crtListPath, "utf8")).toBe(text);

		const second = await cycle(t, want);
		expect(second.steps).toEqual([]);
		expect(second.verdicts.find((v) => v.class === "pinned")).toMatchObject({
			pendingChange: { file: h.crtListPath },
		});
		for (const sni of names) expect(await served(h, sni)).toBe(normaliseSerial(keeper.serial));
		expect(await h.workerPid()).toBe(pid);
		expect(d.scheduledReloads).toEqual([]);
		await assertReloadSafe(h, { names });
	});
});
