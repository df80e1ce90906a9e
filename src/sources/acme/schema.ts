/** Config of an ACME issuer (`type: acme` under `sources`). Every key is documented in docs/acme.md. */
import { z } from "zod";

const DURATION = /^(\d+)(ms|s|m|h)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** "250ms", "30s", "5m", "1h" → milliseconds. */
export function parseDuration(text: string): number {
	const m = DURATION.exec(text);
	if (!m) throw new Error(`not a duration: ${text}`);
	return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}

const duration = z.string().regex(DURATION, 'expected a duration like "250ms", "30s", "5m" or "1h"');

/** host:port, IPv6 hosts in brackets ("[::1]:8402"). */
const listenAddress = z
	.string()
	.regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'expected "host:port", e.g. "127.0.0.1:8402"');

export const keyTypeSchema = z.enum(["ecdsa-p256", "ecdsa-p384", "rsa-2048", "rsa-4096"]);

export const acmeIssuerSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("acme"),
	/** The CA's directory, e.g. https://acme-v02.api.letsencrypt.org/directory. */
	directory_url: z.url({ protocol: /^https?$/ }),
	/** Account contact; sent as mailto: on registration. */
	email: z.email().optional(),
	/** Registration implies agreeing to the CA's terms of service; set false to refuse (issuance then fails). */
	agree_tos: z.boolean().default(true),
	/** External Account Binding from the CA (ZeroSSL, Google, step-ca, ...). */
	eab: z
		.strictObject({
			kid: z.string().min(1),
			hmac_key: z.string().min(1).optional(),
			hmac_key_file: z.string().min(1).optional(),
		})
		.refine((e) => (e.hmac_key === undefined) !== (e.hmac_key_file === undefined), {
			message: "give exactly one of hmac_key and hmac_key_file",
		})
		.optional(),
	/** PEM bundle trusted for the ACME server's HTTPS instead of the system roots. */
	ca_file: z.string().min(1).optional(),
	/** Key type of issued certificates when a certificate does not set its own. */
	key_type: keyTypeSchema.default("ecdsa-p256"),
	/** Built-in HTTP-01 responder. Default: 127.0.0.1:8402 when dns_hook is not set either. */
	http01: z.strictObject({ listen: listenAddress }).optional(),
	/** DNS-01 hook: argv run as `<argv...> set|clear <record name> <value>`. */
	dns_hook: z.array(z.string().min(1)).min(1).optional(),
	dns_hook_timeout: duration.default("60s"),
	/** Wait after the hook set the record, before asking the CA to validate. */
	dns_propagation_wait: duration.default("0s"),
	/** Orders in flight at once for this issuer. */
	concurrency: z.int().min(1).max(64).default(4),
	/** First delay between polls of an order or authorization (doubles up to 10x). */
	poll_interval: duration.default("1s"),
	/** Give up on one issuance after this long. */
	timeout: duration.default("5m"),
	/** Retries of one request when the CA is unreachable or answers 429/503. */
	http_retries: z.int().min(0).max(10).default(2),
});

export type AcmeIssuerConfig = z.infer<typeof acmeIssuerSchema>;
/** Config as written (defaults not applied yet). */
export type AcmeIssuerConfigInput = z.input<typeof acmeIssuerSchema>;
export const DEFAULT_HTTP01_LISTEN = "127.0.0.1:8402";
