/** The 3-file set the stress and crash tests publish: every file carries its version and an end marker. */
import { readFileSync } from "node:fs";
import type { DesiredFiles } from "../../../src/atomicdir/index.js";

export const SET_NAMES = ["tls.crt", "tls.key", "ca.crt"] as const;
const FILLER: Record<string, string> = {
	"tls.crt": "c".repeat(2000),
	"tls.key": "k".repeat(300),
	"ca.crt": "a".repeat(1500),
};

export function versionedFiles(version: number): DesiredFiles {
	const files: Record<string, { content: string; mode: number }> = {};
	for (const name of SET_NAMES) {
		files[name] = {
			content: `v=${version}\n${FILLER[name]}\nend\n`,
			mode: name === "tls.key" ? 0o600 : 0o644,
		};
	}
	return files;
}

/** The version a file holds, or "torn" when it is not one complete file of the set. */
export function versionOf(name: string, text: string): number | "torn" {
	const m = /^v=(\d+)\n([a-z]*)\nend\n$/.exec(text);
	if (m === null || m[2] !== FILLER[name]) return "torn";
	return Number(m[1]);
}

export function readVersion(path: string, name: string): number | "torn" {
	return versionOf(name, readFileSync(path, "utf8"));
}

/** The same set as one combined file (the haproxy-pem shape): the three parts one after another. */
export function combinedContent(version: number): string {
	const files = versionedFiles(version);
	return SET_NAMES.map((n) => files[n]!.content as string).join("");
}

export function combinedVersions(text: string): (number | "torn")[] {
	const parts = text.split(/(?<=\nend\n)/);
	if (parts.length !== SET_NAMES.length) return ["torn"];
	return SET_NAMES.map((n, i) => versionOf(n, parts[i] ?? ""));
}
