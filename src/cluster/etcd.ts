/**
 * The one place that constructs the `etcd3` client (pinned at 1.1.2: low-maintenance, so it is wrapped and every
 * use goes through here). Every unary RPC gets a deadline (the client sets none by default, and gRPC queues calls
 * while etcd is unreachable, delivering them late); streams (watch, lease keepalive) get none. Keys live under the
 * configured prefix, so several installations can share one etcd.
 */
import { readFileSync } from "node:fs";
import {
	ConsecutiveBreaker,
	circuitBreaker,
	ExponentialBackoff,
	handleWhen,
	retry,
	TimeoutStrategy,
	timeout,
	wrap,
} from "cockatiel";
import { type CallOptionsFactory, Etcd3, type IOptions, isRecoverableError, type Namespace } from "etcd3";
import { CertificateeError, describeError } from "../errors.js";

export interface EtcdSettings {
	/** Client URLs: "https://etcd-1:2379". */
	endpoints: string[];
	/** Every key under it, e.g. "certificatee/". */
	prefix: string;
	ca_file?: string;
	cert_file?: string;
	key_file?: string;
	username?: string;
	password?: string;
	/** Deadline of each unary RPC, ms. Default 2000. */
	deadline_ms?: number;
}

export interface EtcdConnection {
	/** Keys relative to the prefix. */
	kv: Namespace;
	/** The unprefixed client: leases, and elections built on kv. */
	client: Etcd3;
	settings: EtcdSettings;
	/** Milliseconds each unary RPC may take. */
	deadlineMs: number;
	close(): void;
}

export const DEFAULT_DEADLINE_MS = 2000;

function readPem(path: string | undefined, field: string): Buffer | undefined {
	if (path === undefined) return undefined;
	try {
		return readFileSync(path);
	} catch (e) {
		throw new CertificateeError("CONFIG_SECRET_UNREADABLE", `cannot read cluster.etcd.${field} ${path}`, {
			context: { file: path, field: `cluster.etcd.${field}` },
			hint: "check the path and that certificatee may read it",
			cause: e,
		});
	}
}

/** The client's options from the settings: TLS, auth, and the per-call deadline for unary calls only. */
export function etcdOptions(settings: EtcdSettings): IOptions {
	const deadlineMs = settings.deadline_ms ?? DEFAULT_DEADLINE_MS;
	const defaultCallOptions: CallOptionsFactory = (context) =>
		context.isStream ? {} : { deadline: Date.now() + deadlineMs };
	const rootCertificate = readPem(settings.ca_file, "ca_file");
	const certChain = readPem(settings.cert_file, "cert_file");
	const privateKey = readPem(settings.key_file, "key_file");
	const recoverable = handleWhen(isRecoverableError);
	return {
		hosts: settings.endpoints,
		defaultCallOptions,
		// The client's defaults retry a call 3 times at once and then refuse every call to a host for 5 s, even
		// after it is back: a dead etcd took 3 deadlines to report, a recovered one 5 s more. Here: one endpoint,
		// no retry (it fails within its deadline); several, retries on the other members with a growing pause
		// (a raft election among them takes 1-2 s), all within 2 deadlines; a failing host is paused for 1 s.
		faultHandling: {
			host: () => circuitBreaker(recoverable, { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(3) }),
			global:
				settings.endpoints.length > 1
					? wrap(
							timeout(2 * deadlineMs, TimeoutStrategy.Aggressive),
							retry(recoverable, {
								maxAttempts: 8,
								backoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: 1000 }),
							}),
						)
					: retry(recoverable, { maxAttempts: 0 }),
		},
		...(rootCertificate || certChain
			? {
					credentials: {
						rootCertificate: rootCertificate ?? Buffer.alloc(0),
						...(certChain ? { certChain } : {}),
						...(privateKey ? { privateKey } : {}),
					},
				}
			: {}),
		...(settings.username !== undefined
			? { auth: { username: settings.username, password: settings.password ?? "" } }
			: {}),
	};
}

export function connectEtcd(settings: EtcdSettings): EtcdConnection {
	const client = new Etcd3(etcdOptions(settings));
	return {
		kv: client.namespace(settings.prefix),
		client,
		settings,
		deadlineMs: settings.deadline_ms ?? DEFAULT_DEADLINE_MS,
		close: () => client.close(),
	};
}

/**
 * An etcd failure as CLUSTER_UNAVAILABLE naming the endpoints and the operation; retryable. The client's message
 * is kept (it names the gRPC status, never a value).
 */
export function clusterUnavailable(settings: EtcdSettings, operation: string, e: unknown): CertificateeError {
	if (e instanceof CertificateeError) return e;
	return new CertificateeError(
		"CLUSTER_UNAVAILABLE",
		`etcd ${operation} failed at ${settings.endpoints.join(", ")}: ${describeError(e)}`,
		{
			context: { endpoint: settings.endpoints.join(","), operation },
			hint: "check that etcd is up and reachable from this host (etcdctl endpoint health), and the TLS and auth settings under cluster.etcd",
			retryable: true,
		},
	);
}
