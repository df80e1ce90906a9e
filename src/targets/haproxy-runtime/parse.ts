/**
 * Pure parsing of HAProxy runtime API (CLI) answers, as measured on 2.6.12 and 3.2
 * (test/targets/haproxy-runtime/parse.test.ts holds the answers). No I/O: text in, typed data or a verdict out.
 */
import { createInterner, flat, intern } from "../../base/intern.js";
import { normaliseSerial } from "../../certificates/index.js";
import type { ErrorCode } from "../../errors.js";
import { saysInUse } from "../haproxy/refusals.js";

/** One entry of `show ssl cert` (list). */
export interface CertList {
	/** Names in HAProxy's in-memory store (the path as spelled in the configuration). */
	names: string[];
	/** Name of the open transaction, when one is open (`# transaction` section, `*name`). */
	transaction?: string;
}

/** `show ssl cert <name>`, parsed. Fields absent for an `Empty` store. */
export interface CertDetail {
	filename: string;
	/** 3.2+: the files HAProxy loaded it from, as the configuration spells them (relative to a crt-base/key-base). */
	crtFilename?: string;
	keyFilename?: string;
	/** Used, Unused, Empty, Uncommitted (3.2). */
	status: string;
	/** Even-length uppercase hex, as `openssl x509 -serial` prints it. */
	serial?: string;
	notBefore?: Date;
	notAfter?: Date;
	/** DNS names from the SAN extension, lowercase, in order (HAProxy prints IP SANs as empty items). */
	sans: string[];
	/** e.g. RSA2048, EC256. */
	algorithm?: string;
	/** SHA-1 of the leaf DER, uppercase hex without colons. */
	sha1?: string;
	subject?: string;
	issuer?: string;
	/** Intermediates as HAProxy lists them (`Chain Subject:` / `Chain Issuer:` pairs). */
	chain: { subject: string; issuer: string }[];
}

/** One line of `show ssl crt-list -n <list>`. */
export interface CrtListEntry {
	/** Certificate name (store path). */
	file: string;
	/** Line number (runtime-added entries get counter values, never reused). */
	line?: number;
	/** SSL options between brackets, without the brackets (NUL bytes removed). */
	options?: string;
	/** SNI filters. */
	filters: string[];
}

/** Splits lines, dropping the trailing empty line(s) every answer ends with. */
function lines(text: string): string[] {
	return text.replace(/\n+$/, "").split("\n");
}

export function parseCertList(text: string): CertList {
	const result: CertList = { names: [] };
	let section: "filename" | "transaction" | undefined;
	for (const line of lines(text)) {
		if (line === "") continue;
		if (line.startsWith("#")) {
			const header = line.slice(1).trim();
			section = header === "transaction" ? "transaction" : header === "filename" ? "filename" : undefined;
			continue;
		}
		if (section === "transaction") result.transaction = line.startsWith("*") ? line.slice(1) : line;
		else if (section === "filename") result.names.push(flat(line));
	}
	return result;
}

/** HAProxy prints dates as `Nov 30 08:46:40 2026 GMT` (ASN1_TIME_print). */
export function parseHaproxyDate(value: string): Date | undefined {
	const m = /^([A-Z][a-z]{2})\s+(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4}) GMT$/.exec(value.trim());
	if (!m) return undefined;
	const month = MONTHS.indexOf(m[1] ?? "");
	if (month < 0) return undefined;
	return new Date(Date.UTC(Number(m[6]), month, Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5])));
}
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// Dates as HAProxy prints them, kept once: 50 nodes holding the same certificate print the same two dates.
const dates = createInterner<Date | undefined>();

/**
 * `show ssl cert <name>`. Every value is kept as a copy of its own (interned: the same serial, fingerprint,
 * subject, names and dates read from many nodes are one string, one array, one Date), never as a slice of the
 * answer, so a detail kept between observations does not keep the answer it was read from.
 */
export function parseCertDetail(text: string): CertDetail {
	const detail: CertDetail = { filename: "", status: "", sans: [], chain: [] };
	let pendingChainSubject: string | undefined;
	for (const line of lines(text)) {
		const colon = line.indexOf(": ");
		const key = colon < 0 ? line.replace(/:$/, "") : line.slice(0, colon);
		const value = colon < 0 ? "" : line.slice(colon + 2).trim();
		switch (key) {
			case "Filename":
				detail.filename = flat(value);
				break;
			case "Crt filename":
				detail.crtFilename = flat(value);
				break;
			case "Key filename":
				detail.keyFilename = flat(value);
				break;
			case "Status":
				detail.status = intern(value);
				break;
			case "Serial":
				detail.serial = intern(normaliseSerial(value));
				break;
			case "notBefore":
				detail.notBefore = dates.get(value, parseHaproxyDate);
				break;
			case "notAfter":
				detail.notAfter = dates.get(value, parseHaproxyDate);
				break;
			case "Subject Alternative Name":
				detail.sans = value
					.split(",")
					.map((s) => s.trim())
					.filter((s) => s.startsWith("DNS:"))
					.map((s) => intern(s.slice(4).toLowerCase()));
				break;
			case "Algorithm":
				detail.algorithm = intern(value);
				break;
			case "SHA1 FingerPrint":
				detail.sha1 = intern(value.toUpperCase());
				break;
			case "Subject":
				detail.subject = intern(value);
				break;
			case "Issuer":
				detail.issuer = intern(value);
				break;
			case "Chain Subject":
				pendingChainSubject = intern(value);
				break;
			case "Chain Issuer":
				detail.chain.push({ subject: pendingChainSubject ?? "", issuer: intern(value) });
				pendingChainSubject = undefined;
				break;
		}
	}
	return detail;
}

/** `show ssl crt-list`: the names of crt-lists and crt directories (without trailing slash). */
export function parseCrtLists(text: string): string[] {
	return lines(text).filter((l) => l !== "" && !l.startsWith("#"));
}

/** `show ssl crt-list [-n] <list>`. HAProxy prints a NUL byte after an ALPN list; it is dropped. */
export function parseCrtList(text: string): CrtListEntry[] {
	const entries: CrtListEntry[] = [];
	for (const raw of lines(text.replaceAll("\0", ""))) {
		if (raw === "" || raw.startsWith("#")) continue;
		const m = /^(\S+?)(?::(\d+))?(?:\s+\[([^\]]*)\])?(?:\s+(.*))?$/.exec(raw);
		if (!m) continue;
		const entry: CrtListEntry = {
			file: flat(m[1] ?? ""),
			filters: (m[4] ?? "").split(/\s+/).filter((f) => f !== ""),
		};
		if (m[2] !== undefined) entry.line = Number(m[2]);
		if (m[3] !== undefined) entry.options = m[3].trim();
		entries.push(entry);
	}
	return entries;
}

/**
 * `acme status` (3.2+): certificate name -> the acme section managing it. Undefined when HAProxy does not know
 * the command (before 3.2, or without ACME).
 */
export function parseAcmeStatus(text: string): Map<string, string> | undefined {
	const [header, ...rows] = lines(text);
	if (!header?.startsWith("# certificate")) return undefined;
	const managed = new Map<string, string>();
	for (const row of rows) {
		const [name, section] = row.split("\t");
		if (name && section) managed.set(name, section);
	}
	return managed;
}

/** `show info`: `Key: value` lines into a record. */
export function parseInfo(text: string): Record<string, string> {
	const info: Record<string, string> = {};
	for (const line of lines(text)) {
		const colon = line.indexOf(":");
		if (colon <= 0) continue;
		info[line.slice(0, colon)] = line.slice(colon + 1).trim();
	}
	return info;
}

/** Leading `+ ` payload continuation prompts (one per payload line on 2.6 in prompt mode). */
export function stripContinuationPrompts(text: string): string {
	return text.replace(/^(\+ )+/, "");
}

/** HAProxy refuses every certificate command while a commit is rebuilding instances. */
export function isLocked(text: string): boolean {
	return text.includes("Operations on certificates are currently locked!");
}

/** Keeps only the PEM blocks, LF endings, no blank lines, one trailing newline. */
export function normalisePem(pem: string): string {
	const blocks = pem
		.replace(/\r\n?/g, "\n")
		.match(/-----BEGIN [^-\n]+-----\n[\s\S]*?\n-----END [^-\n]+-----/g);
	if (!blocks) return "";
	return `${blocks
		.map((b) =>
			b
				.split("\n")
				.map((l) => l.trim())
				.filter((l) => l !== "")
				.join("\n"),
		)
		.join("\n")}\n`;
}

/** The answers that mean success, per command (research §2.5). Each returns an error text or undefined. */
export const expect = {
	set(name: string, text: string): string | undefined {
		const m = /^Transaction (?:created|updated) for certificate (.*)!\n/.exec(text);
		if (!m) return firstLine(text);
		if (m[1] !== name) return `transaction belongs to '${m[1]}', not '${name}'`;
		return undefined;
	},
	commit(name: string, text: string): string | undefined {
		const m = /^Committing (.*?)\.*\nSuccess!\n/.exec(text);
		if (m && m[1] === name) return undefined;
		return firstLine(text);
	},
	abort(name: string, text: string): string | undefined {
		return text.startsWith(`Transaction aborted for certificate '${name}'!`) ? undefined : firstLine(text);
	},
	new(name: string, text: string): string | undefined {
		return text.startsWith(`New empty certificate store '${name}'!`) ? undefined : firstLine(text);
	},
	del(name: string, text: string): string | undefined {
		return text.startsWith(`Certificate '${name}' deleted!`) ? undefined : firstLine(text);
	},
	addCrtList(_name: string, text: string): string | undefined {
		return /(^|\n)Success!\n/.test(text) && !text.startsWith("Can't") ? undefined : firstLine(text);
	},
	delCrtList(name: string, text: string): string | undefined {
		return text.startsWith(`Entry '${name}' deleted in crtlist `) ? undefined : firstLine(text);
	},
};

/** The code of a refused command: RUNTIME_CERT_IN_USE for `del ssl cert` of a certificate still used, else RUNTIME_COMMAND_FAILED. */
export function refusalCode(operation: string, text: string): ErrorCode {
	return operation === "del ssl cert" && saysInUse(firstLine(text))
		? "RUNTIME_CERT_IN_USE"
		: "RUNTIME_COMMAND_FAILED";
}

/** The meaningful part of an error answer: its non-empty lines, joined. */
export function firstLine(text: string): string {
	const meaningful = text
		.split("\n")
		.map((l) => l.trim())
		.filter((l) => l !== "");
	return meaningful.join(" / ") || "(empty answer)";
}
