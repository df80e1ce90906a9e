/** Watching a source directory: one onChange per burst of changes, debounced. */
import { type FSWatcher, watch as fsWatch } from "node:fs";
import type { DirectorySourceConfig } from "./schema.js";

/**
 * Calls onChange once the directory has been quiet for `debounce`, or `MAX_WAIT_DEBOUNCES` × `debounce` after
 * the first change of a burst if it keeps changing (a tool writing thousands of files must not hold every
 * renewal back until it is done). Returns the stop function.
 */
export function watchDirectory(config: DirectorySourceConfig, onChange: () => void): () => void {
	let quiet: NodeJS.Timeout | undefined;
	let latest: NodeJS.Timeout | undefined;
	let watcher: FSWatcher | undefined;
	const run = () => {
		clearTimeout(quiet);
		clearTimeout(latest);
		latest = undefined;
		onChange();
	};
	const fire = () => {
		clearTimeout(quiet);
		quiet = setTimeout(run, config.debounce);
		latest ??= setTimeout(run, config.debounce * MAX_WAIT_DEBOUNCES);
	};
	try {
		watcher = fsWatch(config.path, { persistent: false }, fire);
		// The directory may disappear; the next load reports it.
		watcher.on("error", fire);
	} catch {
		// Not watchable now (missing): periodic loads still pick it up.
	}
	return () => {
		clearTimeout(quiet);
		clearTimeout(latest);
		watcher?.close();
	};
}

const MAX_WAIT_DEBOUNCES = 10;
