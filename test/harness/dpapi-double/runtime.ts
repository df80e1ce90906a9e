/**
 * The double's runtime endpoints, performed on the real HAProxy through the project's runtime-socket client,
 * so "in use" refusals, stale listings and serials are HAProxy's own. Status codes as the real server sends
 * them (dpapi.md §3-4): HAProxy errors are 500, an unknown crt-list entry on delete is 404, and a failed
 * `set` echoes the whole socket command, key included (the client must scrub it).
 */
import { basename } from "node:path";
import { describeError } from "../../../src/errors.js";
import type { CertDetail } from "../../../src/targets/haproxy-runtime/parse.js";
import { type DoubleContext, errorBody, type Handled, type RuntimeOverflow } from "./context.js";

/** The bytes client-native writes to the stats socket for `set ssl cert` (runtime/certs.go, heredoc.go). */
function setCertRequestBytes(name: string, pem: string): number {
	const payload = pem.endsWith("\n") ? pem : `${pem}\n`;
	return Buffer.byteLength(`set severity-output number;set ssl cert ${name} <<\n${payload}\n\n`);
}

/**
 * HAProxy's answer to a `set ssl cert` request of bufsize bytes or more, recorded instead of sent (the test
 * HAProxy must survive): undefined when the request fits. The real server gets no answer (a spinning worker,
 * then a dead HAProxy) or a closed connection, and answers 500 either way.
 */
export function overflow(
	ctx: DoubleContext,
	operation: string,
	name: string,
	pem: string,
): Handled | undefined {
	const bytes = setCertRequestBytes(name, pem);
	if (bytes < ctx.bufsize) return undefined;
	const spinning = ctx.overflows.filter((o) => o.effect === "worker spinning").length;
	const effect: RuntimeOverflow["effect"] =
		bytes > ctx.bufsize ? "connection closed" : spinning > 0 ? "haproxy killed" : "worker spinning";
	ctx.overflows.push({ operation, name, bytes, effect });
	return errorBody(
		500,
		effect === "connection closed"
			? ` [set ssl cert ${name}]`
			: `read unix @->runtime socket: i/o timeout [set ssl cert ${name}]`,
	);
}

function detailBody(d: CertDetail): Record<string, unknown> {
	const body: Record<string, unknown> = { storage_name: d.filename };
	if (d.status) body.status = d.status;
	if (d.serial) body.serial = d.serial;
	if (d.notBefore) body.not_before = d.notBefore.toISOString();
	if (d.notAfter) body.not_after = d.notAfter.toISOString();
	if (d.sans.length > 0) body.subject_alternative_names = d.sans.map((s) => `DNS:${s}`).join(", ");
	if (d.algorithm) body.algorithm = d.algorithm;
	if (d.sha1) body.sha1_finger_print = d.sha1;
	if (d.subject) body.subject = d.subject;
	if (d.issuer) body.issuers = d.issuer;
	const last = d.chain.at(-1);
	if (last) {
		body.chain_subject = last.subject;
		body.chain_issuer = last.issuer;
	}
	return body;
}

/** The upstream client puts the failed socket command, payload included, into the error text. */
function echoed(e: unknown, command: string, pem?: string): Handled {
	return errorBody(500, `${describeError(e)}: ${command}${pem === undefined ? "" : ` <<\n${pem}`}`);
}

/** `show info` fields as client-native's parser of `show info typed` names them (runtime/info.go). */
const INFO_FIELDS: Record<string, { key: string; number?: true }> = {
	Version: { key: "version" },
	Nbthread: { key: "nbthread", number: true },
	Nbproc: { key: "processes", number: true },
	Process_num: { key: "process_num", number: true },
	Pid: { key: "pid", number: true },
	Uptime_sec: { key: "uptime", number: true },
	Node: { key: "node" },
	Stopping: { key: "stopping", number: true },
};

export const runtime = {
	/** The worker the API's runtime client reaches; a socket error is a 200 with `error`, as client-native does. */
	async info(ctx: DoubleContext): Promise<Handled> {
		const socket = ctx.runtimeSocket;
		let text: Record<string, string>;
		try {
			text = await ctx.runtime.showInfo();
		} catch (e) {
			return { status: 200, body: { runtimeAPI: socket, error: describeError(e) } };
		}
		const info: Record<string, string | number> = {};
		for (const [field, { key, number }] of Object.entries(INFO_FIELDS)) {
			const value = text[field];
			if (value === undefined) continue;
			if (!number) info[key] = value;
			else if (/^\d+$/.test(value)) info[key] = Number(value);
		}
		return { status: 200, body: { runtimeAPI: socket, info } };
	},

	/** `storage_name` and `description` only (client-native runtime/certs.go parseCerts over `show ssl cert`). */
	async list(ctx: DoubleContext): Promise<Handled> {
		const { names } = await ctx.runtime.showCerts();
		return { status: 200, body: names.map((n) => ({ storage_name: n, description: basename(n) })) };
	},

	/**
	 * client-native's parseCertEntry: on 3.2+ the name reported is HAProxy's `Crt filename` (as the
	 * configuration spells it: `a.crt` for a crt-store load under a crt-base), and a `Key filename` other than
	 * the crt file is refused ("storing the private key in a separate file is not supported"), a 500.
	 */
	async get(ctx: DoubleContext, name: string): Promise<Handled> {
		const detail = await ctx.runtime.showCert(name);
		if (detail === undefined) return errorBody(404, `ssl certificate ${name} does not exist`);
		const storageName = detail.crtFilename ?? detail.filename;
		if (detail.keyFilename !== undefined && detail.keyFilename !== detail.crtFilename) {
			return errorBody(
				500,
				`${ctx.runtimeSocket} failed to parse certificate info for ${storageName}: storing the private key in a separate file is not supported`,
			);
		}
		return { status: 200, body: { ...detailBody(detail), storage_name: storageName } };
	},

	/** The part's filename, reduced to its basename (Go's multipart does it), names the certificate. */
	async create(ctx: DoubleContext, upload: { filename: string; text: string }): Promise<Handled> {
		const name = basename(upload.filename);
		try {
			await ctx.runtime.newCert(name);
		} catch (e) {
			return echoed(e, `new ssl cert ${name}`);
		}
		// The empty store made by `new` stays behind when `set` fails (dpapi.md §3).
		const tooLarge = overflow(ctx, "createCert", name, upload.text);
		if (tooLarge) return tooLarge;
		try {
			await ctx.runtime.setCert(name, upload.text);
		} catch (e) {
			return echoed(e, `set ssl cert ${name}`, upload.text);
		}
		try {
			await ctx.runtime.commitCert(name);
		} catch (e) {
			return echoed(e, `commit ssl cert ${name}`);
		}
		return { status: 201 };
	},

	async replace(ctx: DoubleContext, name: string, text: string): Promise<Handled> {
		const tooLarge = overflow(ctx, "replaceCert", name, text);
		if (tooLarge) return tooLarge;
		try {
			await ctx.runtime.setCert(name, text);
		} catch (e) {
			return echoed(e, `set ssl cert ${name}`, text);
		}
		try {
			await ctx.runtime.commitCert(name);
		} catch (e) {
			return echoed(e, `commit ssl cert ${name}`);
		}
		return { status: 200 };
	},

	async delete(ctx: DoubleContext, name: string): Promise<Handled> {
		try {
			await ctx.runtime.delCert(name);
			return { status: 204 };
		} catch (e) {
			return echoed(e, `del ssl cert ${name}`);
		}
	},

	async crtLists(ctx: DoubleContext): Promise<Handled> {
		return { status: 200, body: (await ctx.runtime.showCrtLists()).map((file) => ({ file })) };
	},

	async entries(ctx: DoubleContext, list: string): Promise<Handled> {
		const entries = await ctx.runtime.showCrtList(list);
		if (entries === undefined) return errorBody(404, `crt-list ${list} does not exist`);
		// HAProxy prints a crt directory's members as `<path>:0`; current client-native drops line numbers < 1.
		const shown = entries.filter((e) => ctx.lineZeroEntries || (e.line ?? 0) >= 1);
		return {
			status: 200,
			body: shown.map((e) => ({
				file: e.file,
				line_number: e.line ?? 0,
				...(e.options ? { ssl_bind_config: e.options } : {}),
				...(e.filters.length > 0 ? { sni_filter: e.filters } : {}),
			})),
		};
	},

	async addEntry(ctx: DoubleContext, list: string, entry: unknown): Promise<Handled> {
		const e = entry as { file?: string; ssl_bind_config?: string; sni_filter?: string[] };
		if (!e.file) return errorBody(400, "file is required");
		try {
			await ctx.runtime.addCrtListEntry(list, e.file, {
				...(e.ssl_bind_config ? { sslOptions: e.ssl_bind_config } : {}),
				...(e.sni_filter ? { filters: e.sni_filter } : {}),
			});
			return { status: 201 };
		} catch (e2) {
			return echoed(e2, `add ssl crt-list ${list} ${e.file}`);
		}
	},

	async deleteEntry(ctx: DoubleContext, list: string, certFile: string, line?: number): Promise<Handled> {
		try {
			await ctx.runtime.delCrtListEntry(list, certFile, line);
			return { status: 204 };
		} catch (e) {
			return errorBody(404, describeError(e));
		}
	},
};
