/**
 * TSIG (RFC 8945): HMAC signatures on DNS messages with a secret shared with the server. Signs requests and
 * verifies the server's signed response; dns-packet has no TSIG, so the record is built here on the bytes.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { canonicalName, normaliseName, recordOffsets, TYPE_TSIG } from "./dns-wire.js";
import type { TsigAlgorithm } from "./schema.js";

export interface TsigKey {
	name: string;
	algorithm: TsigAlgorithm;
	/** The decoded secret; never logged. */
	secret: Buffer;
}

/** Seconds of clock difference the server tolerates (RFC 8945 §10 recommends 300). */
const FUDGE = 300;
const CLASS_ANY = 255;

/** TSIG error codes a server returns in the TSIG record (RFC 8945 §3). */
export const TSIG_ERRORS: Record<number, string> = {
	16: "BADSIG",
	17: "BADKEY",
	18: "BADTIME",
	22: "BADTRUNC",
};

function u16(n: number): Buffer {
	const b = Buffer.alloc(2);
	b.writeUInt16BE(n);
	return b;
}

function u48(n: number): Buffer {
	const b = Buffer.alloc(6);
	b.writeUIntBE(n, 0, 6);
	return b;
}

function hmac(key: TsigKey, parts: Buffer[]): Buffer {
	const h = createHmac(key.algorithm.slice("hmac-".length), key.secret);
	for (const p of parts) h.update(p);
	return h.digest();
}

/** The TSIG variables digested after the message (RFC 8945 §4.3.3). */
function variables(key: TsigKey, timeSigned: number, error: number, other: Buffer): Buffer[] {
	return [
		canonicalName(key.name),
		u16(CLASS_ANY),
		Buffer.alloc(4), // TTL 0
		canonicalName(key.algorithm),
		u48(timeSigned),
		u16(FUDGE),
		u16(error),
		u16(other.length),
		other,
	];
}

export interface Signed {
	message: Buffer;
	/** The request's MAC: the response's MAC covers it. */
	mac: Buffer;
}

/** Appends a TSIG record to `message` (which must have no TSIG yet). `now` in seconds since the epoch. */
export function signMessage(message: Buffer, key: TsigKey, now: number): Signed {
	const id = message.readUInt16BE(0);
	const mac = hmac(key, [message, ...variables(key, now, 0, Buffer.alloc(0))]);
	const rdata = Buffer.concat([
		canonicalName(key.algorithm),
		u48(now),
		u16(FUDGE),
		u16(mac.length),
		mac,
		u16(id),
		u16(0), // error
		u16(0), // other len
	]);
	const record = Buffer.concat([
		canonicalName(key.name),
		u16(TYPE_TSIG),
		u16(CLASS_ANY),
		Buffer.alloc(4),
		u16(rdata.length),
		rdata,
	]);
	const signed = Buffer.concat([message, record]);
	signed.writeUInt16BE(message.readUInt16BE(10) + 1, 10);
	return { message: signed, mac };
}

/** What the TSIG on a response says. */
export type TsigVerdict =
	| { kind: "verified" }
	| { kind: "unsigned" }
	/** The server could not verify our request (BADSIG, BADKEY, BADTIME, ...); its answer is unsigned. */
	| { kind: "rejected"; error: string }
	/** A signature that does not verify with our key, or from another key or time. */
	| { kind: "forged"; why: string };

interface TsigRecord {
	owner: string;
	algorithm: string;
	timeSigned: number;
	mac: Buffer;
	originalId: number;
	error: number;
	other: Buffer;
	/** Where the TSIG record starts in the message. */
	start: number;
}

function readName(buf: Buffer, offset: number): { name: string; next: number } {
	const labels: string[] = [];
	let next = -1;
	for (let jumps = 0; jumps < 64; jumps++) {
		const len = buf.readUInt8(offset);
		if (len === 0) return { name: labels.join("."), next: next < 0 ? offset + 1 : next };
		if ((len & 0xc0) === 0xc0) {
			if (next < 0) next = offset + 2;
			offset = buf.readUInt16BE(offset) & 0x3fff;
			continue;
		}
		labels.push(buf.toString("ascii", offset + 1, offset + 1 + len));
		offset += len + 1;
	}
	throw new Error("DNS name with a compression loop");
}

/** The last additional record when it is a TSIG (RFC 8945 §5.1: it must be last). */
function lastTsig(message: Buffer): TsigRecord | undefined {
	if (message.readUInt16BE(10) === 0) return undefined;
	const start = recordOffsets(message).records.at(-1)!;
	const owner = readName(message, start);
	if (message.readUInt16BE(owner.next) !== TYPE_TSIG) return undefined;
	let at = owner.next + 10;
	const algorithm = readName(message, at);
	at = algorithm.next;
	const timeSigned = message.readUIntBE(at, 6);
	const macSize = message.readUInt16BE(at + 8);
	at += 10;
	const mac = message.subarray(at, at + macSize);
	at += macSize;
	const otherLen = message.readUInt16BE(at + 4);
	return {
		owner: owner.name,
		algorithm: algorithm.name,
		timeSigned,
		mac,
		originalId: message.readUInt16BE(at),
		error: message.readUInt16BE(at + 2),
		other: message.subarray(at + 6, at + 6 + otherLen),
		start,
	};
}

/** Checks the response to a request signed with `key` whose MAC was `requestMac`. */
export function verifyResponse(response: Buffer, key: TsigKey, requestMac: Buffer, now: number): TsigVerdict {
	const tsig = lastTsig(response);
	if (!tsig) return { kind: "unsigned" };
	if (tsig.error !== 0)
		return { kind: "rejected", error: TSIG_ERRORS[tsig.error] ?? `TSIG error ${tsig.error}` };
	if (
		normaliseName(tsig.owner) !== normaliseName(key.name) ||
		normaliseName(tsig.algorithm) !== key.algorithm
	) {
		return { kind: "forged", why: `signed with key ${tsig.owner} (${tsig.algorithm})` };
	}
	const unsigned = Buffer.from(response.subarray(0, tsig.start));
	unsigned.writeUInt16BE(tsig.originalId, 0);
	unsigned.writeUInt16BE(unsigned.readUInt16BE(10) - 1, 10);
	const expected = hmac(key, [
		u16(requestMac.length),
		requestMac,
		unsigned,
		...variables(key, tsig.timeSigned, tsig.error, tsig.other),
	]);
	if (expected.length !== tsig.mac.length || !timingSafeEqual(expected, tsig.mac)) {
		return { kind: "forged", why: "the response's MAC does not verify" };
	}
	if (Math.abs(now - tsig.timeSigned) > FUDGE) {
		return {
			kind: "forged",
			why: `the response was signed ${Math.abs(now - tsig.timeSigned)} s away from now`,
		};
	}
	return { kind: "verified" };
}
