/**
 * Boundaries of the Data Plane API target: its configuration, and the shapes of the answers the
 * server sends (spec/dataplaneapi-v3.yaml, as the server really fills them: docs/haproxy-dataplane-target.md).
 */
import { z } from "zod";
import { httpAddressSchema, probeAddressSchema } from "../../base/address.js";
import { duration } from "../../base/duration.js";
import { byteSize } from "../../base/size.js";
import { trustStoreSchema } from "../../certificates/trust.js";
import { DEFAULT_BUFSIZE } from "../haproxy/bufsize.js";
import { endpointDeadline } from "../haproxy/deadline.js";
import { reloadsSchema } from "../haproxy/reloads.js";

/** One Data Plane API server. `password_file` and `${ENV}` are resolved before this schema sees values. */
export const dataplaneEndpointSchema = z.strictObject({
	name: z.string().min(1),
	url: z.url({ protocol: /^https?$/, error: "expected an http(s) URL" }),
	username: z.string().min(1),
	password: z.string().min(1),
	/** PEM bundle of CAs that sign the API's HTTPS certificate; the system store when absent. */
	ca_file: z.string().min(1).optional(),
	/** Turns off HTTPS verification (logged as a warning on every client start). */
	insecure_skip_verify: z.boolean().default(false),
	/** host:port where HAProxy serves TLS, for handshake probes by SNI. */
	probe: probeAddressSchema.optional(),
	/** host:port where this node's HAProxy serves plain HTTP (port 80): HTTP-01 through an HAProxy map checks it there. */
	http_address: httpAddressSchema.optional(),
	/** One request as a whole (headers and body), per attempt. */
	timeout: duration.pipe(z.number().positive({ error: "timeout must be more than 0" })).prefault("10s"),
	/** The largest answer read (a storage listing of 10,000 certificates is about 20 MiB). */
	max_response_size: byteSize.prefault("64MiB"),
	/** The API reaches HAProxy through its master CLI (dataplaneapi's `master_runtime`, HAProxy in master-worker
	 * mode): after the writes only `/runtime/info` is asked, and the endpoint is observed again only when the
	 * worker changed. Otherwise (the default) it is observed again in full. */
	master_runtime: z.boolean().optional(),
});
export type DataplaneEndpointConfig = z.output<typeof dataplaneEndpointSchema>;

export const dataplaneTargetSchema = z.strictObject({
	name: z.string().min(1),
	type: z.literal("haproxy-dataplane"),
	endpoints: z.array(dataplaneEndpointSchema).min(1),
	/** Names of the certificates[] entries this target carries; all when absent. */
	certificates: z.array(z.string()).optional(),
	/** A PEM bundle (or `system`) every chain must verify against before it is pushed to this target. */
	trust_store: trustStoreSchema,
	/** Allow a runtime update whose certificate no longer covers a name the served one covers. */
	allow_name_removal: z.boolean().default(false),
	/** Legacy duplicates: "remove" them once their keeper is stable (default), or "report" and keep them current. */
	legacy_duplicates: z.enum(["remove", "report"]).default("remove"),
	/** The API's ssl-certs-dir as haproxy.cfg spells it (HAProxy names certificates by that path). */
	storage_dir: z.string().min(1).default("/etc/haproxy/ssl"),
	/** A crt-list file new certificates are added to at runtime; without it they are served after the next reload. */
	crt_list: z.string().min(1).optional(),
	/** HAProxy's tune.bufsize: a runtime write whose `set ssl cert` request would reach it is never sent. */
	bufsize: z.number().int().min(1024).default(DEFAULT_BUFSIZE),
	/** The reload budget (docs/reloads.md): default max_per_hour 0, never reload. */
	reloads: reloadsSchema,
	/** One endpoint's whole cycle (observe, writes, probes): past it the endpoint is failed for the cycle. */
	endpoint_deadline: endpointDeadline,
	/** Every N-th observation of an endpoint GETs every certificate; the others only what can have changed. */
	full_observation_every: z.number().int().min(1).default(10),
});
export type DataplaneTargetConfig = z.output<typeof dataplaneTargetSchema>;

const dateTime = z.iso.datetime({ offset: true }).nullish();

/** `ssl_certificate`: every property is optional; which ones are filled depends on storage vs runtime. */
export const sslCertificateSchema = z.looseObject({
	/** Storage: the file's basename; runtime: HAProxy's store name. Always sent. */
	storage_name: z.string().min(1),
	file: z.string().optional(),
	description: z.string().optional(),
	size: z.number().int().nullish(),
	not_before: dateTime,
	not_after: dateTime,
	serial: z.string().optional(),
	subject: z.string().optional(),
	issuers: z.string().optional(),
	domains: z.string().optional(),
	ip_addresses: z.string().optional(),
	subject_alternative_names: z.string().optional(),
	algorithm: z.string().optional(),
	sha1_finger_print: z.string().optional(),
	sha256_finger_print: z.string().optional(),
	status: z.string().optional(),
	chain_subject: z.string().optional(),
	chain_issuer: z.string().optional(),
});
export type SslCertificate = z.output<typeof sslCertificateSchema>;
export const sslCertificatesSchema = z.array(sslCertificateSchema);

export const storageListSchema = sslCertificatesSchema;
export const runtimeListSchema = sslCertificatesSchema;

export const crtListEntrySchema = z.looseObject({
	file: z.string(),
	line_number: z.number().int().min(0).optional(),
	ssl_bind_config: z.string().optional(),
	sni_filter: z.array(z.string()).nullish(),
});
export type CrtListEntry = z.output<typeof crtListEntrySchema>;
export const crtListEntriesSchema = z.array(crtListEntrySchema);
export const crtListsSchema = z.array(z.looseObject({ file: z.string() }));

/** `crt_store` as GET /configuration/crt_stores sends it: the section only, never its loads. */
export const crtStoreSchema = z.looseObject({
	/** "" for an unnamed `crt-store` section (HAProxy's `@/<alias>`). */
	name: z.string(),
	crt_base: z.string().optional(),
	key_base: z.string().optional(),
});
export type CrtStore = z.output<typeof crtStoreSchema>;
export const crtStoresSchema = z.array(crtStoreSchema);

/** `crt_load`: the configuration's tokens, quotes included (client-native keeps them). */
export const crtLoadSchema = z.looseObject({
	certificate: z.string().min(1),
	key: z.string().optional(),
	alias: z.string().optional(),
	ocsp: z.string().optional(),
	issuer: z.string().optional(),
	sctl: z.string().optional(),
	ocsp_update: z.string().optional(),
	acme: z.string().optional(),
	domains: z.array(z.string()).nullish(),
});
export type CrtLoad = z.output<typeof crtLoadSchema>;
/** A store without loads answers null (a nil Go slice), against the spec. */
export const crtLoadsSchema = z
	.array(crtLoadSchema)
	.nullable()
	.transform((loads) => loads ?? []);

/** `ssl_front_use` (v3.2+): one `ssl-f-use` line of a frontend, its tokens with their quotes (client-native). */
export const sslFrontUseSchema = z.looseObject({
	certificate: z.string().min(1),
	key: z.string().optional(),
	ocsp: z.string().optional(),
	issuer: z.string().optional(),
	sctl: z.string().optional(),
});
export type SslFrontUse = z.output<typeof sslFrontUseSchema>;
/** A frontend without ssl-f-use lines answers null (client-native's x-omitempty slice). */
export const sslFrontUsesSchema = z
	.array(sslFrontUseSchema)
	.nullable()
	.transform((uses) => uses ?? []);

export const infoSchema = z.looseObject({
	api: z.looseObject({ version: z.string().optional(), build_date: z.string().optional() }).optional(),
	system: z.looseObject({ hostname: z.string().optional() }).optional(),
});
export type DataplaneInfo = z.output<typeof infoSchema>;

/** `GET /services/haproxy/runtime/info`: client-native's `show info typed`, from the worker that answered. */
export const processInfoSchema = z.looseObject({
	error: z.string().nullish(),
	runtimeAPI: z.string().nullish(),
	info: z
		.looseObject({
			pid: z.number().int().nullish(),
			/** Uptime_sec. */
			uptime: z.number().int().nullish(),
			node: z.string().nullish(),
		})
		.nullish(),
});
export type ProcessInfo = z.output<typeof processInfoSchema>;

/** `map_entry`: a runtime map's key and value (`id` is HAProxy's entry address, in listings only). */
export const mapEntrySchema = z.looseObject({
	id: z.string().optional(),
	key: z.string(),
	value: z.string(),
});
export type MapEntry = z.output<typeof mapEntrySchema>;
export const mapEntriesSchema = z.array(mapEntrySchema);

/** The `error` body; `code` equals the HTTP status only from v3.3.6, so callers key on the status. */
export const errorBodySchema = z.looseObject({
	code: z.number().nullish(),
	message: z.string().nullish(),
});
