/** What the double's handlers share: where files live, HAProxy's runtime client, and reloads. */
import type { RuntimeClient } from "../../../src/targets/haproxy-runtime/socket.js";

export interface DoubleContext {
	/** The storage directory (ssl-certs-dir): a directory the harness HAProxy loads. */
	storageDir: string;
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
