/** Durations in config are strings like "90s", "5m", "7d" or "1h30m"; inside the program they are milliseconds. */
import { z } from "zod";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;

/** Milliseconds in `text` ("90s", "1h30m", "7d"), or undefined when it is not a duration. */
export function parseDuration(text: string): number | undefined {
	const trimmed = text.trim();
	if (trimmed.length === 0) return undefined;
	PART.lastIndex = 0;
	let total = 0;
	let end = 0;
	for (let m = PART.exec(trimmed); m !== null; m = PART.exec(trimmed)) {
		total += Number(m[1]) * (UNIT_MS[m[2] ?? ""] ?? 0);
		end = PART.lastIndex;
	}
	return end === trimmed.length ? Math.round(total) : undefined;
}

/** A positive duration string, parsed to milliseconds. */
export const durationSchema = z.string().transform((text, ctx) => {
	const ms = parseDuration(text);
	if (ms === undefined || ms <= 0) {
		ctx.addIssue({
			code: "custom",
			message: `"${text}" is not a duration (use e.g. "90s", "30m", "7d", "1h30m")`,
		});
		return z.NEVER;
	}
	return ms;
});

/** "1h30m" style text for a number of milliseconds, for reports. */
export function formatDuration(ms: number): string {
	if (ms < 1_000) return `${Math.round(ms)}ms`;
	let rest = Math.round(ms / 1_000);
	const parts: string[] = [];
	for (const [unit, size] of [
		["d", 86_400],
		["h", 3_600],
		["m", 60],
		["s", 1],
	] as const) {
		if (rest >= size) {
			parts.push(`${Math.floor(rest / size)}${unit}`);
			rest %= size;
		}
	}
	return parts.join("");
}
