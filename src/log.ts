/** Logging: pino, JSON by default, pretty on a TTY. Redaction of secrets is configured here, once. */
import { type DestinationStream, type Logger, pino } from "pino";
import { scrubSecrets } from "./errors.js";

export type { Logger };

/** Paths pino blanks out wherever they appear (two levels deep covers config echoes and error contexts). */
export const REDACT_PATHS = [
	"password",
	"*.password",
	"*.*.password",
	"key",
	"*.key",
	"keyPem",
	"*.keyPem",
	"pem",
	"*.pem",
	"hmac_key",
	"*.hmac_key",
	"*.*.hmac_key",
	"authorization",
	"*.authorization",
	"*.headers.authorization",
];

export interface LogOptions {
	level?: string;
	/** Pretty output for humans; default: when stderr is a TTY. */
	pretty?: boolean;
	/** Where to write (tests); default stderr. */
	destination?: DestinationStream;
}

export function createLogger(options: LogOptions = {}): Logger {
	const base = {
		level: options.level ?? "info",
		redact: { paths: REDACT_PATHS, censor: "[redacted]" },
		base: { name: "certificatee" },
		// Every message goes through the scrubber: known secret values and their shapes (errors.ts).
		hooks: {
			logMethod(this: Logger, args: Parameters<Logger["info"]>, method: (...a: unknown[]) => void) {
				method.apply(
					this,
					args.map((a) => (typeof a === "string" ? scrubSecrets(a) : a)),
				);
			},
		},
	};
	if (options.destination) return pino(base, options.destination);
	const pretty = options.pretty ?? process.stderr.isTTY === true;
	if (pretty) {
		return pino({
			...base,
			transport: { target: "pino-pretty", options: { destination: 2, ignore: "pid,hostname,name" } },
		});
	}
	return pino(base, pino.destination(2));
}
