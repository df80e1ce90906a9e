/**
 * DNS messages for RFC 2136 updates and the TXT look-ups that check them, over TCP (RFC 1035 §4.2.2: each
 * message prefixed by its 16-bit length). dns-packet builds and parses the messages; what it lacks (the
 * UPDATE opcode's class NONE, byte offsets of records for TSIG) is done here on the encoded bytes, which
 * dns-packet never compresses.
 */
import { randomInt } from "node:crypto";
import net from "node:net";
import dnsPacket from "dns-packet";

const OPCODE_UPDATE = 5;
const CLASS_NONE = 254;
export const TYPE_TSIG = 250;

/** `host:port` (IPv6 in brackets) or a bare host, port 53. */
export interface DnsServer {
	host: string;
	port: number;
}

export function parseDnsServer(text: string): DnsServer {
	const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(text);
	if (!match) throw new Error(`expected "host:port", got "${text}"`);
	return { host: (match[1] ?? match[2])!, port: match[3] === undefined ? 53 : Number(match[3]) };
}

export function formatDnsServer(server: DnsServer): string {
	return `${server.host.includes(":") ? `[${server.host}]` : server.host}:${server.port}`;
}

/** Lowercase, no trailing dot: how names are compared and shown. */
export function normaliseName(name: string): string {
	return name.replace(/\.$/, "").toLowerCase();
}

/** A name in uncompressed, lowercase wire form (RFC 4034 §6.2), as TSIG digests it. */
export function canonicalName(name: string): Buffer {
	const labels = normaliseName(name).split(".").filter(Boolean);
	return Buffer.concat([
		...labels.map((l) => {
			const bytes = Buffer.from(l, "ascii");
			return Buffer.concat([Buffer.from([bytes.length]), bytes]);
		}),
		Buffer.from([0]),
	]);
}

/** Offset just past the (possibly compressed) name at `offset`. */
function skipName(buf: Buffer, offset: number): number {
	for (;;) {
		const len = buf.readUInt8(offset);
		if (len === 0) return offset + 1;
		if ((len & 0xc0) === 0xc0) return offset + 2;
		offset += len + 1;
	}
}

/** Start offsets of every resource record after the question section, and where the message ends. */
export function recordOffsets(message: Buffer): { records: number[]; end: number } {
	let offset = 12;
	for (let q = message.readUInt16BE(4); q > 0; q--) offset = skipName(message, offset) + 4;
	const count = message.readUInt16BE(6) + message.readUInt16BE(8) + message.readUInt16BE(10);
	const records: number[] = [];
	for (let r = 0; r < count; r++) {
		records.push(offset);
		const rdata = skipName(message, offset) + 10;
		offset = rdata + message.readUInt16BE(rdata - 2);
	}
	return { records, end: offset };
}

export interface TxtChange {
	action: "add" | "delete";
	name: string;
	value: string;
	ttl: number;
}

/**
 * An UPDATE (RFC 2136 §2): zone section = the zone's SOA, no prerequisites, one update record per change.
 * "add" puts the TXT rdata in the RRset; "delete" removes exactly that rdata (class NONE, TTL 0, §2.5.4).
 */
export function updateMessage(zone: string, changes: readonly TxtChange[], id = randomInt(65536)): Buffer {
	const message = dnsPacket.encode({
		id,
		type: "query",
		flags: OPCODE_UPDATE << 11,
		questions: [{ name: normaliseName(zone), type: "SOA", class: "IN" }],
		authorities: changes.map((c) => ({
			name: normaliseName(c.name),
			type: "TXT" as const,
			class: "IN" as const,
			ttl: c.action === "add" ? c.ttl : 0,
			data: [c.value],
		})),
	});
	const { records } = recordOffsets(message);
	changes.forEach((c, k) => {
		if (c.action === "delete") message.writeUInt16BE(CLASS_NONE, skipName(message, records[k]!) + 2);
	});
	return message;
}

/** A plain, non-recursive question: authoritative servers answer from their own data. */
export function queryMessage(
	name: string,
	type: "TXT" | "SOA" | "NS" | "A" | "AAAA",
	id = randomInt(65536),
): Buffer {
	return dnsPacket.encode({ id, type: "query", flags: 0, questions: [{ name: normaliseName(name), type }] });
}

export interface DnsResponse {
	id: number;
	rcode: string;
	/** The TXT values of answers named `name` (each record's strings joined). */
	txt(name: string): string[];
	/** The data of NS, A or AAAA answers named `name`: host names (normalised) or addresses. */
	names(name: string, type: "NS" | "A" | "AAAA"): string[];
}

export function parseResponse(message: Buffer): DnsResponse {
	const packet = dnsPacket.decode(message) as dnsPacket.DecodedPacket & { rcode?: string };
	return {
		id: packet.id ?? 0,
		rcode: packet.rcode ?? "NOERROR",
		txt(name) {
			const wanted = normaliseName(name);
			return (packet.answers ?? []).flatMap((a) =>
				a.type === "TXT" && normaliseName(a.name) === wanted
					? [(Array.isArray(a.data) ? a.data : [a.data]).map((d) => d.toString()).join("")]
					: [],
			);
		},
		names(name, type) {
			const wanted = normaliseName(name);
			return (packet.answers ?? []).flatMap((a) =>
				a.type === type && normaliseName(a.name) === wanted && typeof a.data === "string"
					? [type === "NS" ? normaliseName(a.data) : a.data]
					: [],
			);
		},
	};
}

/** Sends one message over TCP and returns the response (the first with a matching id). */
export function exchangeTcp(server: DnsServer, message: Buffer, signal: AbortSignal): Promise<Buffer> {
	const id = message.readUInt16BE(0);
	return new Promise((resolve, reject) => {
		if (signal.aborted) return reject(signal.reason);
		const socket = net.connect({ host: server.host, port: server.port });
		let received = Buffer.alloc(0);
		const finish = (error: unknown, response?: Buffer) => {
			signal.removeEventListener("abort", onAbort);
			socket.destroy();
			if (response) resolve(response);
			else reject(error);
		};
		const onAbort = () => finish(signal.reason);
		signal.addEventListener("abort", onAbort, { once: true });
		socket.on("connect", () => {
			const length = Buffer.alloc(2);
			length.writeUInt16BE(message.length);
			socket.write(Buffer.concat([length, message]));
		});
		socket.on("data", (chunk: Buffer) => {
			received = Buffer.concat([received, chunk]);
			while (received.length >= 2 && received.length >= 2 + received.readUInt16BE(0)) {
				const response = received.subarray(2, 2 + received.readUInt16BE(0));
				received = received.subarray(2 + response.length);
				if (response.length >= 12 && response.readUInt16BE(0) === id) return finish(undefined, response);
			}
		});
		socket.on("error", (e) => finish(e));
		socket.on("end", () => finish(new Error("the server closed the connection without an answer")));
	});
}
