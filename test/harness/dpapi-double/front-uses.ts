/**
 * The double's `GET /configuration/frontends/{parent_name}/ssl_front_uses` (v3.2+), read from the haproxy.cfg
 * the test HAProxy runs the way client-native reads it (configuration/ssl_front_use.go ParseSSLFrontUses over
 * config-parser's parsers/ssl-f-use.go and params.ParseSSLBindOptions):
 *
 * - tokens keep their quotes (`crt "b.crt"` is `certificate: "\"b.crt\""`), as for crt-store loads;
 * - a frontend without ssl-f-use lines answers `null` (no line: ErrFetch, a nil slice), an unknown frontend 400
 *   ("missing parent", as an unknown crt-store's loads);
 * - only the file keywords certificatee reads are modelled (`crt`, `key`, `ocsp`, `issuer`, `sctl`).
 */
import { readFile } from "node:fs/promises";
import type { DoubleContext, Handled } from "./context.js";
import { errorBody } from "./context.js";
import { SECTIONS, splitLine } from "./crt-stores.js";

const FIELDS: Record<string, "certificate" | "key" | "ocsp" | "issuer" | "sctl"> = {
	crt: "certificate",
	key: "key",
	ocsp: "ocsp",
	issuer: "issuer",
	sctl: "sctl",
};

/** The ssl-f-use lines of each frontend section, in file order. */
export function parseFrontUses(config: string): Map<string, Array<Record<string, string>>> {
	const frontends = new Map<string, Array<Record<string, string>>>();
	let current: Array<Record<string, string>> | undefined;
	for (const raw of config.split("\n")) {
		const { parts } = splitLine(raw.replace(/\r+$/, ""));
		const word = parts[0];
		if (word === undefined) continue;
		if (SECTIONS.has(word)) {
			current = word === "frontend" && parts[1] !== undefined ? [] : undefined;
			if (current) frontends.set(parts[1] as string, current);
			continue;
		}
		if (current === undefined || word !== "ssl-f-use" || parts.length < 3) continue;
		const use: Record<string, string> = {};
		for (let i = 1; i < parts.length; i++) {
			const word = parts[i] as string;
			const field = Object.hasOwn(FIELDS, word) ? FIELDS[word] : undefined;
			const value = parts[i + 1];
			if (field === undefined || value === undefined) continue;
			use[field] = value;
			i++;
		}
		if (use.certificate !== undefined) current.push(use);
	}
	return frontends;
}

export async function frontUses(ctx: DoubleContext, frontend: string): Promise<Handled> {
	const uses = parseFrontUses(await readFile(ctx.configFile, "utf8")).get(frontend);
	if (uses === undefined) return errorBody(400, `missing parent: frontend ${frontend} does not exist`);
	return { status: 200, body: uses.length === 0 ? null : uses };
}
