/** What the double's handlers share: where files live, HAProxy's runtime client, and reloads. */
import type { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";

export interface DoubleContext {
	/** The storage directory (ssl-certs-dir): a directory the harness HAProxy loads. */
	storageDir: string;
	/** The API's maps_dir: runtime map names resolve to `<mapsDir>/<name>.map`. */
	mapsDir: string;
	/** The running haproxy.cfg, scanned by storage DELETE. */
	configFile: string;
	/** The runtime-socket client of test/harness's HAProxy (never a copy). */
	runtime: RuntimeClient;
	/** The socket it talks to, as the API reports it (`runtimeAPI`). */
	runtimeSocket: string;
	/** A reload now (force_reload). */
	reload(): Promise<void>;
	/** Records a reload as scheduled and returns its Reload-ID (the double never reloads by itself). */
	scheduleReload(): string;
	/** Older client-native returned crt-directory members (`<path>:0`) with line_number 0; current drops them. */
	lineZeroEntries: boolean;
	/** HAProxy's tune.bufsize, for the size of the `set ssl cert` requests the API would send. */
	bufsize: number;
	/** Runtime requests the real server would have sent at or over bufsize (never sent to the test HAProxy). */
	overflows: RuntimeOverflow[];
}

/** What HAProxy 2.6.12 does with a CLI request of bufsize bytes or more (research/haproxy-runtime.md §2.3). */
export interface RuntimeOverflow {
	/** The API operation that would have sent it. */
	operation: string;
	/** HAProxy's certificate name in the request. */
	name: string;
	bytes: number;
	/** Exactly bufsize: a worker thread spins; a second one kills HAProxy. Larger: the connection is closed. */
	effect: "worker spinning" | "haproxy killed" | "connection closed";
}

/** A handler's answer: status, JSON body (undefined = none) and extra headers. */
export interface Handled {
	status: number;
	body?: unknown;
	headers?: Record<string, string>;
}

export function errorBody(status: number, message: string): Handled {
	return { status, body: { code: status, message } };
}
