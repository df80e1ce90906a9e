/** The `haproxy-runtime` kind as a target: its one node, run by the HAProxy engine (targets/haproxy/engine/). */
import { storageDirName } from "../haproxy/engine/model.js";
import { haproxyTarget } from "../haproxy/engine/target.js";
import { socketKey } from "../haproxy/engine/writers.js";
import type { TargetFactory } from "../types.js";
import { createRuntimeEndpoint } from "./index.js";

export const runtimeTarget: TargetFactory<"haproxy-runtime"> = (config, deps) => {
	const endpoint = createRuntimeEndpoint(config, {
		now: deps.now,
		...(deps.readOnly ? { readOnly: true } : {}),
		...(deps.place ? { place: deps.place } : {}),
	});
	const dirName = storageDirName(config.crt_dir_name ?? config.crt_dir);
	return haproxyTarget(config, deps, {
		endpoints: [endpoint],
		storageDir: dirName,
		newCertificateCrtList: config.crt_list ?? dirName,
		...(config.crt_list === undefined ? { newCertificateDirDefault: true } : {}),
		addressOf: () => socketKey(config.socket),
		close: () => endpoint.close(),
	});
};
