/** PEM blocks: splitting, and writing them back in the one normal form every consumer accepts. */

export interface PemBlock {
	/** The label between BEGIN and END, e.g. "CERTIFICATE", "PRIVATE KEY". */
	label: string;
	/** Header lines such as "Proc-Type: 4,ENCRYPTED" (legacy encrypted keys). */
	headers: string[];
	/** The decoded body. */
	der: Buffer;
}

export type SplitResult =
	| { ok: true; blocks: PemBlock[] }
	| { ok: false; problem: "binary" | "no-pem" | "truncated" | "bad-base64"; label?: string };

const BEGIN = /^-----BEGIN ([A-Z0-9 ]+)-----$/;
const END = /^-----END ([A-Z0-9 ]+)-----$/;

/** Splits text into PEM blocks; anything outside blocks is ignored (comments, openssl's "Bag Attributes"). */
export function splitPem(text: string): SplitResult {
	// A NUL or other control characters mean DER or another binary format, not PEM.
	if (isBinary(text)) return { ok: false, problem: "binary" };
	// Files glued together without a newline ("-----END CERTIFICATE----------BEGIN ...") are common.
	const lines = text
		.replace(/\r\n?/g, "\n")
		.replace(/(-----END [A-Z0-9 ]+-----)(?!\n|$)/g, "$1\n")
		.replace(/([^\n])(-----BEGIN )/g, "$1\n$2")
		.split("\n");
	const blocks: PemBlock[] = [];
	let current: { label: string; headers: string[]; body: string[] } | undefined;
	for (const raw of lines) {
		const line = raw.trim();
		if (current === undefined) {
			const m = BEGIN.exec(line);
			if (m) current = { label: m[1] as string, headers: [], body: [] };
			continue;
		}
		const end = END.exec(line);
		if (end) {
			if (end[1] !== current.label) return { ok: false, problem: "truncated", label: current.label };
			const body = current.body.join("");
			if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length % 4 !== 0) {
				return { ok: false, problem: "bad-base64", label: current.label };
			}
			blocks.push({ label: current.label, headers: current.headers, der: Buffer.from(body, "base64") });
			current = undefined;
			continue;
		}
		if (BEGIN.test(line)) return { ok: false, problem: "truncated", label: current.label };
		if (line === "") continue;
		if (line.includes(":") && current.body.length === 0) current.headers.push(line);
		else current.body.push(line);
	}
	if (current !== undefined) return { ok: false, problem: "truncated", label: current.label };
	if (blocks.length === 0) return { ok: false, problem: "no-pem" };
	return { ok: true, blocks };
}

/** One block in normal form: 64-column base64, LF endings, trailing newline, no blank lines. */
export function encodePem(label: string, der: Buffer): string {
	const b64 = der.toString("base64");
	const lines: string[] = [];
	for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
	return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/** A NUL or other C0 control characters (besides tab, CR, LF) mean DER or another binary format. */
function isBinary(text: string): boolean {
	for (let i = 0; i < text.length; i++) {
		const c = text.charCodeAt(i);
		if (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return true;
	}
	return false;
}
