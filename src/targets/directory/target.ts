/** The `directory` kind as a target: one endpoint (its path); failed on_change runs remembered in the local state store. */
import { loadTrustStore } from "../../certificates/trust.js";
import type { TargetFactory } from "../types.js";
import { pendingHooksIn } from "./pending-hooks.js";
import { createDirectoryRunner } from "./runner.js";

export const directoryTarget: TargetFactory<"directory"> = (config, deps) => ({
	...createDirectoryRunner(
		config,
		deps.localStore && !deps.readOnly
			? { pendingHooks: pendingHooksIn(deps.localStore, config.name, deps.stateDir) }
			: {},
		deps.now,
		{
			...(deps.neverDowngrade ? { neverDowngrade: true } : {}),
			...(config.trust_store
				? { trust: loadTrustStore(config.trust_store, `targets.${config.name}.trust_store`) }
				: {}),
			...(deps.certificateTrust ? { certificateTrust: deps.certificateTrust } : {}),
			...(deps.owns ? { owns: (endpoint: string) => deps.owns!(config.name, endpoint) } : {}),
		},
	),
	close: async () => {},
});
