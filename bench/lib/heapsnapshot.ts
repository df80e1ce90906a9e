/**
 * A V8 heap snapshot (.heapsnapshot, from v8.writeHeapSnapshot) summed up by what holds the bytes: self size per
 * node type and constructor name, largest first, and the strings by kind (flat, sliced, cons) with the
 * commonest values. Run: `npx tsx bench/lib/heapsnapshot.ts FILE [top]`.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

interface Snapshot {
	snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] }; node_count: number };
	nodes: number[];
	strings: string[];
}

export interface HeapSummary {
	totalMiB: number;
	nodes: number;
	byConstructor: Array<{ type: string; name: string; count: number; mib: number }>;
	/** String values held by many nodes: the candidates for interning. */
	repeatedStrings: Array<{ value: string; count: number; mib: number }>;
}

export function summariseHeap(file: string, top = 30): HeapSummary {
	const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
	const fields = s.snapshot.meta.node_fields;
	const types = s.snapshot.meta.node_types[0];
	const width = fields.length;
	const fType = fields.indexOf("type");
	const fName = fields.indexOf("name");
	const fSize = fields.indexOf("self_size");
	const groups = new Map<string, { type: string; name: string; count: number; bytes: number }>();
	const strings = new Map<string, { count: number; bytes: number }>();
	let total = 0;
	for (let i = 0; i < s.nodes.length; i += width) {
		const type = types[s.nodes[i + fType]!] ?? "?";
		const size = s.nodes[i + fSize]!;
		const rawName = s.strings[s.nodes[i + fName]!] ?? "";
		total += size;
		const isString = type === "string" || type === "concatenated string" || type === "sliced string";
		const name = isString ? "" : rawName.length > 60 ? `${rawName.slice(0, 57)}...` : rawName;
		const key = `${type}\u0000${name}`;
		const g = groups.get(key) ?? { type, name, count: 0, bytes: 0 };
		g.count += 1;
		g.bytes += size;
		groups.set(key, g);
		if (isString) {
			// Key material never reaches a summary (a file that may be committed): only that it was there.
			// A PEM body without its header (a slice of the file, a decoded line) is base64 DER, a key's as often as
			// a certificate's: every such string is redacted too.
			const value = /PRIVATE KEY/.test(rawName)
				? "(a PEM holding a private key: redacted)"
				: /^MI[A-Za-z0-9+/]{30,}/.test(rawName)
					? "(base64 DER, a key or a certificate: redacted)"
					: rawName.length > 80
						? `${rawName.slice(0, 77)}...`
						: rawName;
			const st = strings.get(value) ?? { count: 0, bytes: 0 };
			st.count += 1;
			st.bytes += size;
			strings.set(value, st);
		}
	}
	const mib = (b: number) => b / 2 ** 20;
	return {
		totalMiB: mib(total),
		nodes: s.nodes.length / width,
		byConstructor: [...groups.values()]
			.sort((a, b) => b.bytes - a.bytes)
			.slice(0, top)
			.map((g) => ({ type: g.type, name: g.name, count: g.count, mib: mib(g.bytes) })),
		repeatedStrings: [...strings.entries()]
			.filter(([, v]) => v.count > 1)
			.sort((a, b) => b[1].bytes - a[1].bytes)
			.slice(0, top)
			.map(([value, v]) => ({ value, count: v.count, mib: mib(v.bytes) })),
	};
}

export function heapMarkdown(summary: HeapSummary, title: string): string {
	const cell = (t: string) => t.replaceAll("|", "\\|").replaceAll("\n", "\\n");
	return [
		`### ${title}`,
		"",
		`${summary.totalMiB.toFixed(1)} MiB in ${summary.nodes} heap objects.`,
		"",
		"| type | constructor | objects | MiB (self) |",
		"| --- | --- | --- | --- |",
		...summary.byConstructor.map((g) => `| ${g.type} | ${cell(g.name)} | ${g.count} | ${g.mib.toFixed(2)} |`),
		"",
		"Strings held by more than one object (interning candidates):",
		"",
		"| value | copies | MiB |",
		"| --- | --- | --- |",
		...summary.repeatedStrings.map((r) => `| \`${cell(r.value)}\` | ${r.count} | ${r.mib.toFixed(2)} |`),
		"",
	].join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	const [file, top] = process.argv.slice(2);
	if (!file) {
		console.error("usage: npx tsx bench/lib/heapsnapshot.ts FILE.heapsnapshot [top]");
		process.exit(2);
	}
	console.log(heapMarkdown(summariseHeap(file, Number(top ?? 30)), file));
}
