/** Config of an ACME issuer (`type: acme` under `sources`). Every key is documented in docs/acme.md. */
import { z } from "zod";
import { duration } from "../../base/duration.js";

/** host:port, IPv6 hosts in brackets ("[::1]:8402"). */
const listenAddress = z
	.string()
	.regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'expected "host:port", e.g. "127.0.0.1:8402"');

/** TSIG algorithms (RFC 8945 §6), named as in BIND's `key` statement. */
export const TSIG_ALGORITHMS = [
	"hmac-sha256",
	"hmac-sha384",
	"hmac-sha512",
	"hmac-sha224",
	"hmac-sha1",
] as const;
export type TsigAlgorithm = (typeof TSIG_ALGORITHMS)[number];

/** A DNS server: host:port, IPv6 in brackets; a bare host means port 53. */
const dnsServer = z
	.string()
	.regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/, 'expected "host:port", e.g. "10.0.0.53:53"');

const dnsName = z
	.string()
	.regex(/^([A-Za-z0-9_-]+\.)*[A-Za-z0-9_-]+\.?$/, 'expected a DNS name, e.g. "example.com"');

/** DNS-01 through RFC 2136 dynamic updates signed with TSIG (docs/acme.md, "DNS-01 with RFC 2136"). */
export const rfc2136Schema = z.strictObject({
	/** The zone's primary server, which accepts the updates. */
	server: dnsServer,
	/** The zone the `_acme-challenge` records are in. */
	zone: dnsName,
	tsig_key_name: dnsName,
	tsig_algorithm: z.enum(TSIG_ALGORITHMS).default("hmac-sha256"),
	/** File with the key's base64 secret (or a BIND key file); read at start. */
	tsig_secret_file: z.string().min(1),
	/** TTL of the TXT records added. */
	ttl: z.int().min(0).max(86_400).default(60),
	/** Deadline of one DNS exchange (update or query). */
	timeout: duration.prefault("10s"),
	/** How long `set` waits for every checked server to answer the new value. */
	propagation_timeout: duration.prefault("2m"),
	/** Servers that must answer the value before the CA is asked. Default: `server` and the zone's NS
	 * (their addresses, on `server`'s port). */
	check_servers: z.array(dnsServer).min(1).optional(),
});

export const DEFAULT_HTTP01_LISTEN = "127.0.0.1:8402";

/** The built-in responder: HAProxy routes /.well-known/acme-challenge/ to it. */
const http01Responder = z.strictObject({ via: z.literal("responder").optional(), listen: listenAddress });

/**
 * HTTP-01 across a fleet: every token goes into an HAProxy map on every node of the named targets, so any
 * node answers it (README "Challenges across a fleet"). Never written to disk.
 */
const http01HaproxyMap = z.strictObject({
	via: z.literal("haproxy-map"),
	/** Names of haproxy-runtime / haproxy-dataplane targets; every node of each one gets every token. */
	targets: z.array(z.string().min(1)).min(1),
	/** The map file as haproxy.cfg spells it in the rule (`map(/etc/haproxy/acme.map)`). */
	map: z
		.string()
		.regex(/^\/[^\s;#<>]+$/, 'expected an absolute path without spaces, e.g. "/etc/haproxy/acme.map"'),
	/** Per-node wait for the answer to the check GET before the CA is asked. */
	verify_timeout: duration.prefault("5s"),
});
export type Http01HaproxyMapConfig = z.infer<typeof http01HaproxyMap>;

export const acmeSourceSchema = z
	.strictObject({
		name: z.string().min(1),
		type: z.literal("acme"),
		/** The CA's directory, e.g. https://acme-v02.api.letsencrypt.org/directory. */
		directory_url: z.url({ protocol: /^https?$/, error: "expected an http(s) URL" }),
		/** Account contact; sent as mailto: on registration. */
		email: z.email().optional(),
		/** Common name of the root (or any issuer) to prefer among the CA's alternate chains (RFC 8555 §7.4.2). */
		preferred_chain: z.string().min(1).optional(),
		/** The ACME profile (draft-ietf-acme-profiles) this issuer's orders ask for unless a certificate names its
		 * own, e.g. Let's Encrypt's `shortlived` (160 h, the only one with IP addresses). One of the directory's
		 * `meta.profiles` (`validate --online` lists them). */
		profile: z.string().min(1).optional(),
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
		/** HTTP-01: the built-in responder (default 127.0.0.1:8402 when neither dns_hook nor dns01 is set), or an HAProxy map. */
		http01: z.discriminatedUnion("via", [http01Responder, http01HaproxyMap]).optional(),
		/** DNS-01 hook: argv run as `<argv...> set|clear <record name> <value>`. */
		dns_hook: z.array(z.string().min(1)).min(1).optional(),
		dns_hook_timeout: duration.prefault("60s"),
		/** DNS-01 without a hook: `dns01: { rfc2136: {...} }`. Exclusive with dns_hook. */
		dns01: z.strictObject({ rfc2136: rfc2136Schema }).optional(),
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
	})
	.refine((s) => s.dns_hook === undefined || s.dns01 === undefined, {
		message: "give either dns_hook or dns01, not both",
		path: ["dns01"],
	});

export type AcmeSourceConfig = z.infer<typeof acmeSourceSchema>;
