/**
 * The files of a crt-store load (`@store/alias`), for placement.ts: from haproxy_config (haproxy-config.ts),
 * from the runtime's `Crt filename` / `Key filename` (3.2+, relative to bases it does not print) with the
 * target's `crt_stores`, or from both, which must then agree. Where the configuration HAProxy runs and the
 * running HAProxy disagree, or the configuration cannot be read, the load is refused naming the file and
 * line (HAPROXY_CONFIG_MISMATCH, HAPROXY_CONFIG_INVALID): certificatee never writes it.
 */
import { statSync } from "node:fs";
import { isAbsolute, join, normalize } from "node:path";
import type { CertificateeError } from "../../errors.js";
import type { Placement } from "../haproxy/engine/model.js";
import { type CfgAt, type CfgLoad, type HaproxyCfg, resolveAgainst, where } from "./haproxy-config.js";
import type { CertDetail } from "./parse.js";
import type { RuntimeTargetConfig } from "./schema.js";

/** Why a file cannot be told, and, when the configuration HAProxy runs is the cause, the refusal to report. */
export interface Unknown {
	unknown: string;
	as?: NonNullable<Placement["unknownAs"]>;
}

export interface StoreInput {
	config: Pick<RuntimeTargetConfig, "crt_dir" | "crt_stores">;
	/** What haproxy_config says (haproxy-config.ts), when the target names it and it reads. */
	cfg?: HaproxyCfg;
	/** Why haproxy_config, which the target names, cannot be used. */
	cfgError?: CertificateeError;
}

/** A file name as HAProxy spells it, made absolute: as is, or against a crt-store's configured base. */
export function resolve(
	spelled: string,
	store: string | undefined,
	base: "crt_base" | "key_base",
	config: StoreInput["config"],
): string | Unknown {
	if (isAbsolute(spelled)) return spelled;
	const dir = store === undefined ? undefined : config.crt_stores?.[store]?.[base];
	if (dir !== undefined) return join(dir, spelled);
	return {
		unknown:
			store === undefined
				? `HAProxy loads it from "${spelled}", relative to a directory the runtime API does not print; certificatee never writes it`
				: `HAProxy loads it from crt-store ${store}'s "${spelled}", relative to the store's ${base.replace("_", "-")}, which the runtime API does not print: set haproxy_config (or crt_stores.${store}.${base}) in the target to renew it in place`,
	};
}

/** A ref that depends on haproxy_config, which cannot be read or parsed. */
export function cfgInvalid(error: CertificateeError, what: string): Unknown {
	return {
		unknown: `${what} depends on haproxy_config, which certificatee cannot use (${error.message}): never written until it can`,
		as: {
			code: "HAPROXY_CONFIG_INVALID",
			hint: error.hint ?? "fix haproxy_config or remove it from the target",
		},
	};
}

export function mismatch(unknown: string, hint: string): Unknown {
	return {
		unknown: `${unknown}: never written until they agree`,
		as: { code: "HAPROXY_CONFIG_MISMATCH", hint },
	};
}

export const RELOAD_OR_FIX =
	"if the file changed since HAProxy's last reload, reload HAProxy; else point haproxy_config at the file HAProxy runs";

/** 3.2+: the crt-store files the runtime names, against the target's crt_stores bases. */
function fromRuntime(
	detail: CertDetail,
	store: string,
	input: StoreInput,
): { cert: string; key?: string } | Unknown {
	const cert = resolve(detail.crtFilename as string, store, "crt_base", input.config);
	if (typeof cert !== "string") return cert;
	if (detail.keyFilename === undefined || detail.keyFilename === detail.crtFilename) return { cert };
	const key = resolve(detail.keyFilename, store, "key_base", input.config);
	return typeof key === "string" ? { cert, key } : key;
}

/** 3.2+: a load line whose crt or key differs from what the running worker printed. */
function runtimeDisagrees(name: string, load: CfgLoad, detail: CertDetail): Unknown | undefined {
	const said = {
		crt: detail.crtFilename,
		key: detail.keyFilename === detail.crtFilename ? undefined : detail.keyFilename,
	};
	const spelled = { crt: load.crt.value, key: load.key?.value };
	const show = (v: string | undefined) => (v === undefined ? "(none)" : `"${v}"`);
	for (const part of ["crt", "key"] as const) {
		if (said[part] === spelled[part]) continue;
		return mismatch(
			`${where(load.at)} loads ${name} with ${part} ${show(spelled[part])}, but HAProxy's running worker loaded it with ${part} ${show(said[part])} (show ssl cert ${name})`,
			`${where(load.at)}: ${RELOAD_OR_FIX}`,
		);
	}
	return undefined;
}

/**
 * The certificate file and the key argument's file (absolute; undefined: no `key`, the key is in the crt
 * file) of crt-store load `name`, from haproxy_config and/or the runtime's Crt/Key filename (3.2+) and the
 * target's crt_stores. Where two of them speak they must agree.
 */
export function storeFiles(
	name: string,
	store: string,
	detail: CertDetail | undefined,
	input: StoreInput,
): { cert: string; key?: string } | Unknown {
	if (input.cfgError !== undefined) return cfgInvalid(input.cfgError, `crt-store load ${name}`);
	const { cfg } = input;
	const printed = detail?.crtFilename !== undefined;
	if (cfg === undefined) {
		if (printed) return fromRuntime(detail, store, input);
		return {
			unknown: `HAProxy before 3.2 does not print the files of crt-store load ${name}: set haproxy_config in the target (the haproxy.cfg HAProxy runs) to renew it in place; until then certificatee never writes it`,
		};
	}
	const files = cfg.files.join(", ");
	const s = cfg.stores.get(store);
	if (s === undefined) {
		return mismatch(
			`HAProxy holds crt-store load ${name}, but haproxy_config (${files}) declares no crt-store ${store === "" ? "without a name" : `"${store}"`}`,
			`${files} is not what HAProxy runs: ${RELOAD_OR_FIX}`,
		);
	}
	const load = cfg.loads.get(name);
	if (load === undefined) {
		return mismatch(
			`HAProxy holds crt-store load ${name}, but crt-store "${store}" at ${where(s.at)} has no load line by that name`,
			`${where(s.at)}: ${RELOAD_OR_FIX}`,
		);
	}
	const disagreement = printed ? runtimeDisagrees(name, load, detail) : undefined;
	if (disagreement !== undefined) return disagreement;
	const cert = agreed(
		resolveAgainst(load.crt, [s.crtBase, cfg.crtBase], "crt-base"),
		load.crt,
		store,
		"crt_base",
		input,
	);
	if (typeof cert !== "string") return cert;
	if (load.key === undefined) return { cert };
	const key = agreed(
		resolveAgainst(load.key, [s.keyBase, cfg.keyBase], "key-base"),
		load.key,
		store,
		"key_base",
		input,
	);
	if (typeof key !== "string") return key;
	// HAProxy loaded the key file at its last start; one missing now is another configuration (3.0 cannot say).
	if (statSync(key, { throwIfNoEntry: false })?.isFile() !== true) {
		return mismatch(
			`${where(load.at)} loads ${name} with key ${key}, which is not a file: HAProxy did not load it from there`,
			`${where(load.at)}: ${RELOAD_OR_FIX}`,
		);
	}
	return { cert, key };
}

/** A path from haproxy_config, checked against what the target's crt_stores key would make of it. */
function agreed(
	fromCfg: string | { unknown: string },
	{ value: spelled, at }: { value: string; at: CfgAt },
	store: string,
	base: "crt_base" | "key_base",
	input: StoreInput,
): string | Unknown {
	if (typeof fromCfg !== "string") return fromCfg;
	const dir = input.config.crt_stores?.[store]?.[base];
	if (dir === undefined || isAbsolute(spelled)) return fromCfg;
	const fromKey = normalize(join(dir, spelled));
	if (fromCfg === fromKey) return fromCfg;
	const key = `crt_stores.${store || '""'}.${base}`;
	return mismatch(
		`${key} (${dir}) makes "${spelled}" ${fromKey}, haproxy_config makes it ${fromCfg}`,
		`${where(at)} and the target's ${key} disagree: drop ${key} from the target (haproxy_config says it) or make the two agree`,
	);
}
