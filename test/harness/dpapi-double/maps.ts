/**
 * The double's runtime map endpoints, performed on the real HAProxy as client-native does them
 * (runtime/maps.go, runtime_client.go; dataplaneapi handlers/runtime/maps, map_entries):
 * - `{name}` / `{parent_name}` goes through GetMapsPath: `#<id>` as is; otherwise SanitizeFilename, then
 *   `<maps_dir>/<name>.map` (the real server always has a maps_dir, default /etc/haproxy/maps).
 * - add: `get map` first (an existing key is 409), then `add map`; a HAProxy refusal is ErrGeneral: 400.
 * - show / del / clear / get: a HAProxy refusal is ErrNotFound: 404. `show` of an empty map is [].
 * - force_sync (off unless asked) would write the map file; the double only records that it was asked.
 * Errors are recognised as client-native does with `set severity-output number`: any non-empty answer
 * to add/del/clear is HAProxy's refusal.
 */
import { join } from "node:path";
import { type DoubleContext, errorBody, type Handled } from "./context.js";

/** client-native misc.SanitizeFilename. */
export function sanitizeFilename(name: string): string {
	const dot = name.lastIndexOf(".");
	const slash = name.lastIndexOf("/");
	const ext = dot > slash && dot >= 0 ? name.slice(dot) : "";
	let base = name.slice(0, name.length - ext.length);
	const reg = /[^a-zA-Z0-9_\\-]+/g;
	base = base.replace(reg, "_");
	if (ext !== "") {
		const e = ext.slice(1).replace(reg, "_");
		return base !== "" ? `${base}.${e}` : `_${e}`;
	}
	return base;
}

/** client-native GetMapsPath with a maps_dir. */
export function mapsPath(ctx: DoubleContext, name: string): string {
	if (name.startsWith("#")) return name;
	const clean = sanitizeFilename(name);
	return join(ctx.mapsDir, clean.endsWith(".map") ? clean : `${clean}.map`);
}

const socketError = (ctx: DoubleContext, answer: string, command: string, kind: string) =>
	`${ctx.runtimeSocket} [3] ${answer.trim()} [${command}] ${kind}`;

async function getEntry(
	ctx: DoubleContext,
	path: string,
	key: string,
): Promise<{ key: string; value: string } | undefined> {
	const text = await ctx.runtime.run(`get map ${path} ${key}`, { read: true });
	const k = /key="([^"]*)"/.exec(text)?.[1] ?? "";
	const v = /value="([^"]*)"/.exec(text)?.[1] ?? "";
	// client-native's guard: `get map` can match a key that is only a substring of the one asked for.
	return k === "" || v === "" || k !== key ? undefined : { key: k, value: v };
}

async function exec(ctx: DoubleContext, command: string): Promise<string> {
	return (await ctx.runtime.run(command)).trim();
}

export const maps = {
	async entries(ctx: DoubleContext, name: string): Promise<Handled> {
		const path = mapsPath(ctx, name);
		const command = `show map ${path}`;
		const text = await ctx.runtime.run(command, { read: true });
		if (/^Unknown map identifier/.test(text.trim()))
			return errorBody(404, socketError(ctx, text, command, "not found"));
		const body = text
			.split("\n")
			.map((l) => l.trim().split(/\s+/))
			.filter((p) => p.length >= 3 && !p[0]!.startsWith("#"))
			.map(([id, key, value]) => ({ id, key, value }));
		return { status: 200, body };
	},

	async add(ctx: DoubleContext, name: string, entry: unknown): Promise<Handled> {
		const e = entry as { key?: string; value?: string };
		if (typeof e.key !== "string" || typeof e.value !== "string")
			return errorBody(422, "key and value are required");
		const path = mapsPath(ctx, name);
		if (await getEntry(ctx, path, e.key)) return errorBody(409, `${ctx.runtimeSocket} already exists`);
		const command = `add map ${path} ${e.key} ${e.value}`;
		const answer = await exec(ctx, command);
		if (answer !== "") return errorBody(400, socketError(ctx, answer, command, "general error"));
		return { status: 201, body: { key: e.key, value: e.value } };
	},

	async delete(ctx: DoubleContext, name: string, key: string): Promise<Handled> {
		const command = `del map ${mapsPath(ctx, name)} ${key}`;
		const answer = await exec(ctx, command);
		if (answer !== "") return errorBody(404, socketError(ctx, answer, command, "not found"));
		return { status: 204 };
	},

	async clear(ctx: DoubleContext, name: string): Promise<Handled> {
		const command = `clear map ${mapsPath(ctx, name)}`;
		const answer = await exec(ctx, command);
		if (answer !== "") return errorBody(404, socketError(ctx, answer, command, "not found"));
		return { status: 204 };
	},
};
