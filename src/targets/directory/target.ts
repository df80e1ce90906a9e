/** The `directory` kind as a target: one endpoint (its path); failed on_change runs remembered in the state directory. */
import type { TargetFactory } from "../types.js";
import { pendingHooksIn } from "./pending-hooks.js";
import { createDirectoryRunner } from "./runner.js";

export const directoryTarget: TargetFactory<"directory"> = (config, deps) => ({
	...createDirectoryRunner(
		config,
		deps.stateDir && !deps.readOnly ? { pendingHooks: pendingHooksIn(deps.stateDir, config.name) } : {},
		deps.now,
		deps.neverDowngrade ? { neverDowngrade: true } : {},
	),
	close: async () => {},
});
