/** Asserts that text shown to operators (a scrape, a status, a log) carries no key or certificate material. */
import { expect } from "vitest";

/** No PEM armour, no long base64 run, and no line of the given keys' bodies anywhere in the text. */
export function expectNoKeyMaterial(text: string, keys: readonly string[] = []): void {
	expect(text).not.toMatch(/-----BEGIN/);
	expect(text).not.toMatch(/[A-Za-z0-9+/]{40,}={0,2}/);
	for (const key of keys) {
		const body = key.split("\n").filter((l) => l && !l.startsWith("-----"));
		for (const line of body) expect(text).not.toContain(line.slice(0, 24));
	}
}
