/** "did you mean `key_type`?" for an unknown key: the closest key the schema knows at that place. */
import type { z } from "zod";

interface Def {
	type: string;
	shape?: Record<string, z.ZodType>;
	element?: z.ZodType;
	options?: z.ZodType[];
	innerType?: z.ZodType;
	in?: z.ZodType;
}
const def = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Unwraps defaults, optionals and pipes; picks a union's option by the raw object's `type`. */
function unwrap(schema: z.ZodType, raw: unknown): z.ZodType | undefined {
	for (let s: z.ZodType | undefined = schema; s !== undefined; ) {
		const d = def(s);
		if (d.type === "union") {
			const type = (raw as { type?: unknown } | null)?.type;
			s = d.options?.find((o) => {
				const t = unwrap(o, raw);
				const literal = t && def(t).shape?.type;
				return (
					literal !== undefined &&
					(literal as unknown as { _zod: { def: { values?: unknown[] } } })._zod.def.values?.includes(type)
				);
			});
			continue;
		}
		if (d.innerType) s = d.innerType;
		else if (d.type === "pipe" && d.in) s = d.in;
		else return s;
	}
	return undefined;
}

/** The keys an object at `path` may have, given the raw tree (unions are chosen by `type`). */
export function knownKeys(schema: z.ZodType, path: ReadonlyArray<PropertyKey>, raw: unknown): string[] {
	let s: z.ZodType | undefined = schema;
	let value = raw;
	for (const step of path) {
		s = s && unwrap(s, value);
		if (!s) return [];
		const d = def(s);
		value = (value as Record<PropertyKey, unknown> | null)?.[step];
		s = d.type === "array" ? d.element : d.shape?.[String(step)];
	}
	const last = s && unwrap(s, value);
	return Object.keys((last && def(last).shape) ?? {});
}

function distance(a: string, b: string): number {
	let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
	for (let i = 1; i <= a.length; i++) {
		const row = [i];
		for (let j = 1; j <= b.length; j++) {
			row[j] = Math.min(
				(previous[j] ?? 0) + 1,
				(row[j - 1] ?? 0) + 1,
				(previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
			);
		}
		previous = row;
	}
	return previous[b.length] ?? 0;
}

/** The closest known key within a third of the key's length (at least 2 edits), if any. */
export function closestKey(key: string, known: readonly string[]): string | undefined {
	const limit = Math.max(2, Math.floor(key.length / 3));
	let best: { key: string; d: number } | undefined;
	for (const k of known) {
		const d = distance(key, k);
		if (d <= limit && (best === undefined || d < best.d)) best = { key: k, d };
	}
	return best?.key;
}
