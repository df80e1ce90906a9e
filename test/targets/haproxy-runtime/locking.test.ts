import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCertificateeError } from "../../../src/errors.js";
import { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";
import { abortOpenTransaction, updateCertificate } from "../../../src/targets/haproxy-runtime/transaction.js";
import { createTestCa, issueTestLeaf, type TestIssuer } from "../../harness/certs.js";
import { type Haproxy, startHaproxy } from "../../harness/haproxy.js";
import { stopReloadSafe } from "../../harness/invariant.js";

const BINDS = 500;

describe("targets/haproxy-runtime: HAProxy's certificate lock and the one transaction", () => {
	let ca: TestIssuer;
	let h: Haproxy;
	let wide: string;

	beforeAll(async () => {
		ca = await createTestCa("locking root");
		const shared = await issueTestLeaf(ca, { names: ["wide.test"] });
		const other = await issueTestLeaf(ca, { names: ["o.test"] });
		const tag = randomBytes(4).toString("hex");
		// One certificate used by many bind lines: each commit rebuilds every instance and holds the lock.
		const binds = Array.from(
			{ length: BINDS },
			(_, i) => `    bind abns@certificatee-${tag}-${i} ssl crt {dir}/pinned/wide.pem`,
		);
		h = await startHaproxy({
			crtDir: { "o.pem": other.combinedPem },
			pinned: { "wide.pem": shared.combinedPem },
			extraConfig: ["frontend fe_wide", ...binds, "    http-request return status 200"].join("\n"),
		});
		wide = join(h.pinnedDir, "wide.pem");
	});
	afterAll(async () => {
		await stopReloadSafe(h);
	});

	it("answers 'locked' while a commit rebuilds instances: RUNTIME_LOCKED without retries, success with them", async () => {
		const writer = new RuntimeClient({ address: h.adminSocket, name: "writer" });
		const impatient = new RuntimeClient({ address: h.adminSocket, name: "impatient", lockAttempts: 1 });
		// Patient beyond the test's own timeout (attempts back off to 500 ms): one commit of 500 instances took 0.3 to
		// 1.6 s here and more than the 30 attempts' 12 s on a loaded 2-core machine, so any fixed budget flakes.
		const patient = new RuntimeClient({ address: h.adminSocket, name: "patient", lockAttempts: 1000 });
		try {
			const versions = await Promise.all(
				Array.from({ length: 2 }, () => issueTestLeaf(ca, { names: ["wide.test"] })),
			);
			const codes = new Set<string>();
			let writing = true;
			let last = "";
			let patientReads = 0;
			// The patient loop's next completed read (at once when that loop has ended).
			let readSeen = () => {};
			let patientDone = false;
			const nextPatientRead = () =>
				new Promise<void>((resolve) => {
					readSeen = resolve;
					if (patientDone) resolve();
				});
			// Commit until the impatient reader has met the lock (bounded: the test fails if it never does).
			const writes = (async () => {
				try {
					for (let round = 0; round < 60 && codes.size === 0; round++) {
						const v = versions[round % 2];
						if (!v) break;
						await updateCertificate(writer, wide, v.combinedPem);
						last = v.serial;
						// Between commits, as a real writer pauses: until a patient reader got through.
						await nextPatientRead();
					}
				} finally {
					writing = false;
				}
			})();
			const impatientReads = (async () => {
				while (writing) {
					await impatient.showCert(join(h.crtDir, "o.pem")).catch((e: unknown) => {
						codes.add(isCertificateeError(e) ? e.code : String(e));
					});
				}
			})();
			const patientLoop = (async () => {
				try {
					while (writing) {
						expect((await patient.showCert(join(h.crtDir, "o.pem")))?.filename).toBe(join(h.crtDir, "o.pem"));
						patientReads += 1;
						readSeen();
					}
				} finally {
					patientDone = true;
					readSeen();
				}
			})();
			// Every loop ends before the test does, even when one failed: a writer left committing would lock the
			// next test's commands.
			for (const settled of await Promise.allSettled([writes, impatientReads, patientLoop]))
				if (settled.status === "rejected") throw settled.reason;
			expect([...codes]).toEqual(["RUNTIME_LOCKED"]);
			expect(patientReads).toBeGreaterThan(0);
			expect((await patient.showCert(wide))?.serial).toBe(last);
			// The file too, as certificatee writes it beside a commit: the reload-safety invariant then holds.
			const committed = versions.find((v) => v.serial === last);
			if (committed) await writeFile(wide, committed.combinedPem);
		} finally {
			await Promise.all([writer.close(), impatient.close(), patient.close()]);
		}
	});

	it("orders a write between pipelined reads: reads issued after it see its effect", async () => {
		const client = new RuntimeClient({ address: h.adminSocket });
		try {
			await abortOpenTransaction(client);
			const name = join(h.crtDir, "o.pem");
			const v = await issueTestLeaf(ca, { names: ["o.test"] });
			const [before, created, during] = await Promise.all([
				client.showCerts(),
				client.setCert(name, v.combinedPem),
				client.showCerts(),
			]);
			expect(before.transaction).toBeUndefined();
			expect(created).toBe("created");
			expect(during.transaction).toBe(name);
			expect(await client.abortCert(name)).toBe(true);
		} finally {
			await client.close();
		}
	});
});
