import { z } from "zod";

const UNITS: Record<string, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** "512KiB", "64MiB", "1GiB", "4096B" or "4096" → bytes; undefined when malformed. */
export function parseByteSize(text: string): number | undefined {
	const m = /^(\d+)\s*(B|KiB|MiB|GiB)?$/.exec(text.trim());
	if (!m) return undefined;
	return Number(m[1]) * (UNITS[m[2] ?? "B"] ?? 1);
}

/** "64MiB" for 67108864; bytes when not a whole number of a unit. */
export function formatByteSize(bytes: number): string {
	for (const unit of ["GiB", "MiB", "KiB"] as const) {
		const size = UNITS[unit] as number;
		if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
	}
	return `${bytes}B`;
}

/** A size field: a byte count, or a string like "64MiB"; yields bytes. */
export const byteSize = z.union([z.number(), z.string()]).transform((value, ctx) => {
	const bytes = typeof value === "number" ? value : parseByteSize(value);
	if (bytes === undefined || !Number.isInteger(bytes) || bytes <= 0) {
		ctx.addIssue({ code: "custom", message: `expected a size like 512KiB, 64MiB or 1GiB, got "${value}"` });
		return z.NEVER;
	}
	return bytes;
});
