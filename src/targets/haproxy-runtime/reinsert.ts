/**
 * `runtime-reinsert` on a haproxy-runtime endpoint: a ref committed again with the content HAProxy already
 * holds, so its SNI entries go behind the keeper just written (targets/haproxy/engine/serving.ts). The content
 * is read where the ref lives (its placement, on the action): its certificate file and, when the key is a
 * separate file (a crt-store `key`, an `ssl-f-use … key`, an `X.pem.key` companion), that key file. Those files
 * are only read, never written, and nothing else is ever sent.
 */
import { readFile } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { commonName } from "../../certificates/index.js";
import { CertificateeError } from "../../errors.js";
import { leafMeta } from "../../reconcile/leaf-meta.js";
import type { ActionResult } from "../../reconcile/model.js";
import type { HaproxyAction } from "../haproxy/engine/model.js";
import type { RuntimeContext } from "./context.js";
import { keyMatchesPem } from "./keys.js";
import type { CertDetail } from "./parse.js";
import { chainNames, holdsKey, refPath } from "./storage.js";
import { updateCertificate } from "./transaction.js";

type Reinsert = Extract<HaproxyAction, { op: "runtime-reinsert" }>;

const KEY_BLOCK = /-----BEGIN ([A-Z ]*)PRIVATE KEY-----\r?\n[\s\S]*?-----END \1PRIVATE KEY-----\r?\n?/g;

export async function reinsert(ctx: RuntimeContext, action: Reinsert): Promise<ActionResult> {
	const held = await ctx.client.showCert(action.runtimeName);
	if (held === undefined) return { action, ok: true, note: "not in HAProxy's store" };
	const content = await heldContent(ctx, action);
	if (typeof content !== "string" || !holdsWhatIsServed(content, held)) {
		const why = typeof content === "string" ? "its files do not hold what HAProxy serves" : content.why;
		const { name } = ctx.config;
		const error = new CertificateeError(
			"ENDPOINT_ERROR",
			`${name}: cannot re-insert ${action.runtimeName}: ${why}`,
			{
				context: { endpoint: name, target: name, ref: action.ref, operation: action.op },
				hint: "the names it shares with the keeper are served by it until it is removed or a reload",
			},
		);
		return { action, ok: false, error };
	}
	await updateCertificate(ctx.client, action.runtimeName, content);
	return { action, ok: true };
}

/**
 * The PEM HAProxy loaded the ref from: the files its placement names (the certificates of the crt file, then
 * the key file, which overrides a key inside it as HAProxy does), or, without a placement, its combined PEM in
 * crt_dir (a ref outside crt_dir is named by its absolute path).
 */
async function heldContent(ctx: RuntimeContext, action: Reinsert): Promise<string | { why: string }> {
	const cert =
		action.files?.cert ??
		(action.ref === action.runtimeName && isAbsolute(action.ref)
			? action.ref
			: refPath(ctx.config.crt_dir, action.ref));
	const certPem = await readFile(cert, "utf8").catch(() => undefined);
	if (certPem === undefined) return { why: `its certificate file ${cert} cannot be read` };
	const keyFile = action.files?.key;
	if (keyFile === undefined) {
		return holdsKey(certPem) ? certPem : { why: `${cert} holds no private key and no key file is known` };
	}
	const keyPem = await readFile(keyFile, "utf8").catch(() => undefined);
	if (keyPem === undefined) return { why: `its key file ${keyFile} cannot be read` };
	if (!keyMatchesPem(certPem, keyPem)) return { why: `its key file ${keyFile} does not match ${cert}` };
	const certificates = certPem.replace(KEY_BLOCK, "");
	return `${certificates.trimEnd()}\n${keyPem.trim()}\n`;
}

/** The file holds the leaf HAProxy serves and the same chain (by subject and issuer names). */
function holdsWhatIsServed(pem: string, held: CertDetail): boolean {
	const fileChain = chainNames(pem);
	const sameChain =
		fileChain.length === held.chain.length &&
		fileChain.every(
			(c, i) =>
				c.subject === commonName(held.chain[i]?.subject ?? "") &&
				c.issuer === commonName(held.chain[i]?.issuer ?? ""),
		);
	return leafMeta(pem).sha1 === held.sha1 && sameChain;
}
