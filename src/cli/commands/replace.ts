/**
 * `certificatee replace NAME [--file F] --reason "…"`: an operator's deliberate replacement of a certificate by one
 * that expires earlier (a key compromise, a CA change). Never-downgrade stays the default protection (a directory
 * source's SOURCE_OLDER, cluster mode's UPDATE_WOULD_DOWNGRADE); this lifts it for one certificate, named by its
 * fingerprint, recorded in the state store (`replacements/NAME`: etcd in a cluster) so every process and member
 * honours it, and logged as an audit line (who, what, the old and new serial, why). With the daemon running the
 * request goes through `state_dir/requests/` as `renew` does; without it, the command records it and syncs.
 */
import { X509Certificate } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { hostname, userInfo } from "node:os";
import { join } from "node:path";
import { describeCertificate, MAX_BUNDLE_BYTES } from "../../certificates/index.js";
import type { CertificateInfo } from "../../certificates/types.js";
import type { Config } from "../../config/schema.js";
import { openClusterReader } from "../../daemon/cluster.js";
import { REPLACEMENT_RECORDED, replacementAudit } from "../../daemon/summary.js";
import { CertificateeError, describeError } from "../../errors.js";
import { createDirectorySource } from "../../sources/directory/index.js";
import { storedSourceMemory } from "../../sources/directory/memory.js";
import { openFileStore } from "../../store/file-store.js";
import { type Replacement, readCertificateRecord, writeReplacement } from "../../store/records.js";
import type { StateStore } from "../../store/types.js";
import type { CommandContext } from "../context.js";
import { syncCommand } from "./cycle.js";
import { askDaemon, openLocalOrDaemon, waitMs } from "./daemon-request.js";

export async function replaceCommand(
	ctx: CommandContext,
	name: string,
	options: { file?: string; reason?: string; wait?: string },
): Promise<void> {
	const { config } = ctx.loadConfig();
	const reason = (options.reason ?? "").trim();
	if (reason === "") {
		throw new CertificateeError("CONFIG_INVALID", `replace ${name}: --reason is required`, {
			context: { field: "--reason", certificate: name },
			hint: 'say why it is replaced (it goes into the audit line), e.g. --reason "key compromise, ticket 4711"',
		});
	}
	const wait = waitMs(options.wait);
	const replacement = await resolveReplacement(config, name, reason, options.file);
	if (config.cluster) {
		const reader = openClusterReader(config.cluster);
		try {
			await writeReplacement(reader.store, replacement);
		} finally {
			await reader.close();
		}
		return recorded(
			ctx,
			replacement,
			"in etcd: every member honours it at its next cycle (certificatee status shows it)",
		);
	}
	const local = await openLocalOrDaemon(config);
	if ("daemon" in local) {
		ctx.log.info(replacementAudit(replacement), `${REPLACEMENT_RECORDED} (left for the running daemon)`);
		return askDaemon(
			ctx,
			config,
			local.daemon,
			{ kind: "replace", certificate: name, force: false, reason, replacement },
			wait,
		);
	}
	try {
		await writeReplacement(local.store, replacement);
	} finally {
		local.store.close();
	}
	recorded(ctx, replacement, "in the state directory; pushing it now");
	return syncCommand(ctx);
}

function recorded(ctx: CommandContext, r: Replacement, where: string): void {
	ctx.log.info(replacementAudit(r), REPLACEMENT_RECORDED);
	if (ctx.options.json) {
		ctx.out(JSON.stringify({ replacement: r }, null, 2));
		return;
	}
	const was = r.replaces ? ` replaces serial ${r.replaces.serial} (expires ${r.replaces.notAfter})` : "";
	ctx.out(`${r.certificate}: serial ${r.serial} (expires ${r.notAfter})${was}: recorded ${where}`);
}

/** Who asks: the user (and the one behind sudo) on this host. */
function whoAsks(): string {
	let user: string;
	try {
		user = userInfo().username;
	} catch {
		user = `uid ${process.getuid?.() ?? "?"}`;
	}
	const sudo = process.env.SUDO_USER ? ` (sudo from ${process.env.SUDO_USER})` : "";
	return `${user}@${hostname()}${sudo}`;
}

/**
 * The replacement to record: the leaf of `--file`, else the certificate's file in its directory source, else the
 * newest certificate issued for it; and what it replaces (the certificate served now, when another).
 */
async function resolveReplacement(
	config: Config,
	name: string,
	reason: string,
	file: string | undefined,
): Promise<Replacement> {
	const local = await openFileStore(config.state_dir, { readOnly: true });
	const reader = config.cluster ? openClusterReader(config.cluster) : undefined;
	const shared: StateStore = reader?.store ?? local;
	try {
		const source = config.sources.find(
			(s) =>
				s.type === "directory" &&
				(existsSync(join(s.path, `${name}.pem`)) || existsSync(join(s.path, `${name}.crt`))),
		);
		const chosen = await chooseReplacement(config, name, file, source, shared);
		const { leaf } = chosen;
		const replaces = await servedNow(name, source?.type === "directory" ? source : undefined, local, shared);
		return {
			certificate: name,
			fingerprint: leaf.fingerprint,
			serial: leaf.serial,
			notAfter: leaf.notAfter.toISOString(),
			...(replaces && replaces.fingerprint !== leaf.fingerprint
				? { replaces: { serial: replaces.serial, notAfter: replaces.notAfter.toISOString() } }
				: {}),
			reason,
			by: whoAsks(),
			requestedAt: new Date().toISOString(),
			...(chosen.file ? { file: chosen.file } : {}),
		};
	} finally {
		local.close();
		await reader?.close();
	}
}

/**
 * The leaf of `--file`, else of the certificate's file in its directory source, else of the newest certificate
 * issued for it; CONFIG_INVALID when there is none, BUNDLE_EXPIRED when it is no longer valid.
 */
async function chooseReplacement(
	config: Config,
	name: string,
	file: string | undefined,
	source: Config["sources"][number] | undefined,
	shared: StateStore,
): Promise<{ leaf: CertificateInfo; file?: string }> {
	const spec = config.certificates.find((c) => c.name === name);
	let chosen: { leaf: CertificateInfo; file?: string } | undefined;
	if (file !== undefined) chosen = { leaf: leafOf(file, name), file };
	else if (source?.type === "directory") {
		const path = existsSync(join(source.path, `${name}.pem`))
			? join(source.path, `${name}.pem`)
			: join(source.path, `${name}.crt`);
		chosen = { leaf: leafOf(path, name), file: path };
	} else if (spec) {
		const latest = (await readCertificateRecord(shared, name))?.value.history[0];
		if (latest) chosen = { leaf: leafOf(latest.certPem, name, "pem") };
	}
	if (!chosen) {
		throw new CertificateeError("CONFIG_INVALID", `no certificate named "${name}" to replace`, {
			context: { field: "certificates", certificate: name },
			hint: `name a directory source's file stem or a certificates[].name (${config.certificates.map((c) => c.name).join(", ") || "none configured"}), or give the replacement with --file`,
		});
	}
	const { leaf } = chosen;
	if (leaf.notAfter.getTime() <= Date.now()) {
		throw new CertificateeError(
			"BUNDLE_EXPIRED",
			`replace ${name}: the replacement (serial ${leaf.serial}) expired ${leaf.notAfter.toISOString()}`,
			{
				context: { certificate: name, ...(chosen.file ? { file: chosen.file } : {}) },
				hint: "give a valid certificate",
			},
		);
	}
	return chosen;
}

/** The leaf (first certificate) of a PEM file, or of PEM text when `kind` is "pem". */
function leafOf(input: string, name: string, kind: "file" | "pem" = "file"): CertificateInfo {
	let text: string;
	if (kind === "pem") text = input;
	else {
		try {
			if (statSync(input).size > MAX_BUNDLE_BYTES) throw new Error(`larger than ${MAX_BUNDLE_BYTES} bytes`);
			text = readFileSync(input, "utf8");
		} catch (e) {
			throw new CertificateeError(
				"CONFIG_INVALID",
				`replace ${name}: cannot read ${input}: ${describeError(e)}`,
				{
					context: { field: "--file", file: input, certificate: name },
					hint: "give the PEM file that holds the replacement certificate",
				},
			);
		}
	}
	const block = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(text)?.[0];
	try {
		if (block === undefined) throw new Error("no CERTIFICATE block");
		return describeCertificate(new X509Certificate(block));
	} catch (e) {
		throw new CertificateeError(
			"BUNDLE_BAD_CERTIFICATE",
			`replace ${name}: ${kind === "file" ? input : "the stored certificate"} holds no readable certificate (${describeError(e)})`,
			{
				context: { certificate: name, ...(kind === "file" ? { file: input } : {}) },
				hint: "give the PEM file that holds the replacement certificate",
			},
		);
	}
}

/** The certificate served under the name now (its source's answer, held one included), for the audit line. */
async function servedNow(
	name: string,
	source: Extract<Config["sources"][number], { type: "directory" }> | undefined,
	local: StateStore,
	shared: StateStore,
): Promise<CertificateInfo | undefined> {
	try {
		if (source) {
			const memory = storedSourceMemory(source.name, { store: local, readOnly: true, warn: () => undefined });
			const loaded = await createDirectorySource(source, { memory }).load(AbortSignal.timeout(60_000));
			return loaded.certificates.find((c) => c.name === name)?.bundle.leaf;
		}
		const history = (await readCertificateRecord(shared, name))?.value.history ?? [];
		const other = history.slice(1).sort((a, b) => b.notAfter.localeCompare(a.notAfter))[0];
		return other ? leafOf(other.certPem, name, "pem") : undefined;
	} catch {
		// Only for the audit line: a replacement is recorded even when the served one cannot be told.
		return undefined;
	}
}
