/**
 * HTTP-01 answers in the map of each node of a Data Plane API target, through the API's runtime map
 * endpoints (never with force_sync, so nothing is written to the map file). The API names a map by its
 * file's basename without `.map` and looks it up in its maps_dir: the map must live there.
 */
import { basename } from "node:path";
import { CertificateeError, isCertificateeError } from "../../errors.js";
import { type ChallengeMapNode, checkMapWord } from "../haproxy/challenge-map.js";
import { type ClientDeps, createDataplaneClient } from "./client.js";
import type { DataplaneTargetConfig } from "./schema.js";

/** client-native's GetMapsPath: `acme` addresses `<maps_dir>/acme.map`. */
export function apiMapName(map: string): string {
	return basename(map).replace(/\.map$/, "");
}

export function createDataplaneChallengeMaps(
	config: DataplaneTargetConfig,
	map: string,
	deps: ClientDeps = {},
): ChallengeMapNode[] {
	const name = apiMapName(map);
	return config.endpoints.map((endpoint) => {
		const node = `${config.name}/${endpoint.name}`;
		if (endpoint.http_address === undefined) {
			throw new CertificateeError("CONFIG_INVALID", `endpoint ${node} has no http_address`, {
				context: { target: config.name, endpoint: endpoint.name, field: "http_address" },
				hint: "set http_address on every endpoint to the host:port where its HAProxy serves port 80",
			});
		}
		const client = createDataplaneClient(endpoint, deps);
		const absent = (e: unknown) => isCertificateeError(e, "ENDPOINT_NOT_FOUND");
		return {
			name: node,
			httpAddress: endpoint.http_address,
			async set(token, keyAuthorization, signal) {
				const key = checkMapWord(node, "token", token);
				const value = checkMapWord(node, "key authorization", keyAuthorization);
				try {
					await client.maps.add(name, key, value, signal);
				} catch (e) {
					if (!isCertificateeError(e, "ENDPOINT_CONFLICT")) throw e;
					await client.maps.delete(name, key, signal);
					await client.maps.add(name, key, value, signal);
				}
			},
			async remove(token, signal) {
				await client.maps.delete(name, checkMapWord(node, "token", token), signal).catch((e: unknown) => {
					if (!absent(e)) throw e;
				});
			},
			clear: (signal) => client.maps.clear(name, signal),
			close: () => client.close(),
		};
	});
}
