/**
 * HAProxy's runtime maps through the API (`/services/haproxy/runtime/maps`), by the API's map name: the
 * file's basename without `.map`, resolved in the API's maps_dir (client-native GetMapsPath). Never with
 * force_sync: nothing reaches the file on disk.
 */
import { type ApiCalls, named } from "./calls.js";
import { type Exchange, parseBody } from "./http.js";
import { type MapEntry, mapEntriesSchema, mapEntrySchema } from "./schema.js";

/**
 * HAProxy's runtime maps, by the API's map name: the file's basename without `.map`, resolved in the API's
 * maps_dir (client-native GetMapsPath). Never with force_sync: nothing reaches the file on disk.
 */
export interface MapsApi {
	entries(map: string, signal: AbortSignal): Promise<MapEntry[]>;
	/** An existing key: ENDPOINT_CONFLICT (client-native looks it up first). */
	add(map: string, key: string, value: string, signal: AbortSignal): Promise<void>;
	/** A missing key: ENDPOINT_NOT_FOUND. */
	delete(map: string, key: string, signal: AbortSignal): Promise<void>;
	/** `clear map`: every entry (the file stays). */
	clear(map: string, signal: AbortSignal): Promise<void>;
}

const MAPS = "/services/haproxy/runtime/maps";

export function createMapsApi({ endpoint, read, write, writeEmpty }: ApiCalls): MapsApi {
	const mapPath = (map: string) => named(MAPS, map);
	return {
		entries: (map, signal) => read("showRuntimeMap", `${mapPath(map)}/entries`, mapEntriesSchema, signal),
		add: async (map, key, value, signal) => {
			const exchange: Exchange = {
				operation: "addMapEntry",
				method: "POST",
				path: `${mapPath(map)}/entries`,
				body: { contentType: "application/json", data: JSON.stringify({ key, value }) },
				read: false,
			};
			await write(exchange, (reply) => parseBody(endpoint, exchange, reply, mapEntrySchema), signal);
		},
		delete: (map, key, signal) =>
			writeEmpty(
				{
					operation: "deleteRuntimeMapEntry",
					method: "DELETE",
					path: `${mapPath(map)}/entries/${encodeURIComponent(key)}`,
				},
				signal,
			),
		clear: (map, signal) =>
			writeEmpty({ operation: "clearRuntimeMap", method: "DELETE", path: mapPath(map) }, signal),
	};
}
