/** Config of an ACME issuer (`type: acme` under `sources`). Every key is documented in docs/acme.md. */
import { z } from "zod";
import { duration } from "../../base/duration.js";

/** host:port, IPv6 hosts in brackets ("[::1]:8402"). */
const listenAddress = z
	.string()
	.regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'expected "host:port", e.g. "127.0.0.1:8402"');

export const DEFAULT_HTTP01_LISTEN = "127.0.0.1:8402";

export const acmeSourceSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("acme"),
	/** The CA's directory, e.g. https://acme-v02.api.letsencrypt.org/directory. */
	directory_url: z.url({ protocol: /^https?$/, error: "expected an http(s) URL" }),
	/** Account contact; sent as mailto: on registration. */
	email: z.email().optional(),
	/** Common name of the root (or any issuer) to prefer among the CA's alternate chains (RFC 8555 §7.4.2). */
	preferred_chain: z.string().min(1).optional(),
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
	/** Built-in HTTP-01 responder. Default: 127.0.0.1:8402 when dns_hook is not set either. */
	http01: z.strictObject({ listen: listenAddress }).optional(),
	/** DNS-01 hook: argv run as `<argv...> set|clear <record name> <value>`. */
	dns_hook: z.array(z.string().min(1)).min(1).optional(),
	dns_hook_timeout: duration.prefault("60s"),
	/** Wait after the hook set the records, before asking the CA to validate. */
	dns_propagation_wait: duration.prefault("0s"),
	/** Orders in flight at once for this issuer. */
	concurrency: z.int().min(1).max(64).default(4),
	/** First delay between polls of an order or authorization (doubles up to 10x). */
	poll_interval: duration.prefault("1s"),
	/** Give up on one issuance after this long. */
	timeout: duration.prefault("5m"),
	/** Retries of one request when the CA is unreachable or answers 429/503. */
	http_retries: z.int().min(0).max(10).default(2),
});

export type AcmeSourceConfig = z.infer<typeof acmeSourceSchema>;
