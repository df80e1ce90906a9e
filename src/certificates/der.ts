/**
 * A strict DER reader, just enough to walk the structures of keys and certificates (keys.ts). Strict: definite
 * minimal lengths, no trailing bytes, minimal INTEGERs; anything else is `undefined`, never an exception, so a
 * caller can hand an unusual input to OpenSSL instead.
 */

export interface Tlv {
	tag: number;
	/** The contents octets. */
	body: Buffer;
}

export const TAG = {
	integer: 0x02,
	bitString: 0x03,
	octetString: 0x04,
	null: 0x05,
	oid: 0x06,
	sequence: 0x30,
	/** [0] and [1], constructed (EXPLICIT). */
	context0: 0xa0,
	context1: 0xa1,
} as const;

/** The TLVs of `input`, which they must fill exactly; undefined when it is not strict DER. */
export function readAll(input: Buffer): Tlv[] | undefined {
	const out: Tlv[] = [];
	let at = 0;
	while (at < input.length) {
		const tag = input[at] as number;
		// Multi-byte tags never occur in the structures read here.
		if ((tag & 0x1f) === 0x1f || at + 1 >= input.length) return undefined;
		let length = input[at + 1] as number;
		let start = at + 2;
		if (length & 0x80) {
			const bytes = length & 0x7f;
			// 0x80 is BER's indefinite length; more than 3 length bytes is far beyond any key or certificate.
			if (bytes === 0 || bytes > 3 || start + bytes > input.length) return undefined;
			length = 0;
			for (let i = 0; i < bytes; i++) length = length * 256 + (input[start + i] as number);
			// DER: the shortest form (no leading zero byte, long form only from 128 on).
			if (input[start] === 0 || length < 0x80) return undefined;
			start += bytes;
		}
		if (start + length > input.length) return undefined;
		out.push({ tag, body: input.subarray(start, start + length) });
		at = start + length;
	}
	return out;
}

/** The elements of a SEQUENCE (or an EXPLICIT tag's contents) whose encoding is exactly `input`. */
export function readOne(input: Buffer, tag: number): Tlv[] | undefined {
	const [only, ...rest] = readAll(input) ?? [];
	if (!only || rest.length > 0 || only.tag !== tag) return undefined;
	return readAll(only.body);
}

/** A non-negative INTEGER's magnitude, minimal (no leading zero byte); undefined for a negative or a non-minimal one. */
export function unsignedInteger(t: Tlv | undefined): Buffer | undefined {
	if (t?.tag !== TAG.integer || t.body.length === 0) return undefined;
	const b = t.body;
	if (
		b.length > 1 &&
		((b[0] === 0 && !((b[1] as number) & 0x80)) || (b[0] === 0xff && (b[1] as number) & 0x80))
	)
		return undefined;
	if ((b[0] as number) & 0x80) return undefined;
	return b[0] === 0 && b.length > 1 ? b.subarray(1) : b;
}

/** A small INTEGER's value (versions). */
export function smallInteger(t: Tlv | undefined): number | undefined {
	const m = unsignedInteger(t);
	return m !== undefined && m.length <= 1 ? (m[0] ?? 0) : undefined;
}

/** An OBJECT IDENTIFIER in dotted form. */
export function oid(t: Tlv | undefined): string | undefined {
	if (t?.tag !== TAG.oid || t.body.length === 0) return undefined;
	const parts: number[] = [];
	let value = 0;
	for (const byte of t.body) {
		if (value === 0 && byte === 0x80) return undefined; // non-minimal sub-identifier
		value = value * 128 + (byte & 0x7f);
		if (value > Number.MAX_SAFE_INTEGER / 128) return undefined;
		if (!(byte & 0x80)) {
			parts.push(value);
			value = 0;
		}
	}
	if ((t.body.at(-1) as number) & 0x80) return undefined;
	const first = parts[0] as number;
	const head = first < 40 ? [0, first] : first < 80 ? [1, first - 40] : [2, first - 80];
	return [...head, ...parts.slice(1)].join(".");
}

/** A BIT STRING's bytes (no unused bits allowed). */
export function bitStringBytes(t: Tlv | undefined): Buffer | undefined {
	if (t?.tag !== TAG.bitString || t.body.length === 0 || t.body[0] !== 0) return undefined;
	return t.body.subarray(1);
}
