import { z } from "zod";

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "500ms", "30s", "10m", "1h", "7d", or a sum like "1h30m" → milliseconds; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
	const s = text.trim();
	if (!/^(\d+(\.\d+)?(ms|s|m|h|d))+$/.test(s)) return undefined;
	let total = 0;
	for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g))
		total += Number(m[1]) * (UNITS[m[2] as string] ?? 0);
	return total;
}

export function formatDuration(ms: number): string {
	const sign = ms < 0 ? "-" : "";
	let rest = Math.abs(Math.round(ms / 1000));
	const parts: string[] = [];
	for (const [unit, size] of [
		["d", 86_400],
		["h", 3_600],
		["m", 60],
		["s", 1],
	] as const) {
		const n = Math.floor(rest / size);
		if (n > 0 || (unit === "s" && parts.length === 0)) parts.push(`${n}${unit}`);
		rest -= n * size;
		if (parts.length === 2) break;
	}
	return sign + parts.join("");
}

/** A duration field: accepts "30s"-style strings, yields milliseconds. */
export const duration = z.string().transform((text, ctx) => {
	const ms = parseDuration(text);
	if (ms === undefined) {
		ctx.addIssue({ code: "custom", message: `expected a duration like 30s, 10m, 1h or 7d, got "${text}"` });
		return z.NEVER;
	}
	return ms;
});
