/**
 * What haproxy.cfg says about where certificates live, for the runtime target's placement (placement.ts):
 * the `global` section's `crt-base`, `key-base` and `ssl-load-extra-del-ext`, and every `crt-store` section's
 * `crt-base`, `key-base` and `load` lines. Only those: every other line is skipped unread (a word of it is
 * never interpreted), so a configuration certificatee does not fully understand still gives what it needs.
 *
 * Why: HAProxy 3.0's runtime API names a crt-store load (`@web/site-a`) but not its files, and 3.2+ prints
 * them relative to bases it does not print. The configuration HAProxy loaded says both. Words are split as
 * HAProxy splits them (cfgparse's parse_line): blanks separate words, `#` starts a comment, a backslash escapes
 * the next character, double quotes group (with backslash escapes), single quotes group literally. A word
 * holding an environment variable (`"$HOME"`, `"${X}"`, only expanded inside double quotes) is HAProxy's
 * environment, which certificatee does not know: such a value is kept as unknown. A line inside a `.if`
 * block is conditional: certificatee does not evaluate the condition.
 */
import { readFile, stat } from "node:fs/promises";
import { isAbsolute, join, normalize } from "node:path";
import { CertificateeError } from "../../errors.js";

/** Where a value was read: the file and its 1-based line number. */
export interface CfgAt {
	file: string;
	line: number;
	/** The line is inside a `.if` block opened at this line of the same file: it may not apply. */
	conditional?: number;
}

export interface CfgValue {
	value: string;
	at: CfgAt;
	/** The word holds an environment variable: HAProxy's value is not known here. */
	env?: boolean;
}

export interface CfgStore {
	/** "" for an unnamed `crt-store`. */
	name: string;
	crtBase?: CfgValue;
	keyBase?: CfgValue;
	at: CfgAt;
}

/** One `load` line of a crt-store, by the name HAProxy's runtime gives it (`@<store>/<alias or crt>`). */
export interface CfgLoad {
	store: string;
	runtimeName: string;
	crt: CfgValue;
	key?: CfgValue;
	/** `acme <section>`: HAProxy's own ACME client manages it. */
	acme?: string;
	at: CfgAt;
}

export interface HaproxyCfg {
	/** The files read, in order. */
	files: string[];
	crtBase?: CfgValue;
	keyBase?: CfgValue;
	/** `ssl-load-extra-del-ext`: a `.crt` file's extra files drop the extension (`site.key`, not `site.crt.key`). */
	delExt?: CfgAt;
	stores: Map<string, CfgStore>;
	loads: Map<string, CfgLoad>;
}

/** One line split into words as HAProxy does; `env` marks words holding an environment variable. */
export function splitWords(line: string): { words: string[]; env: boolean[] } | { error: string } {
	const words: string[] = [];
	const env: boolean[] = [];
	let word: string | undefined;
	let wordEnv = false;
	let quote: '"' | "'" | undefined;
	const end = () => {
		if (word !== undefined) {
			words.push(word);
			env.push(wordEnv);
		}
		word = undefined;
		wordEnv = false;
	};
	for (let i = 0; i < line.length; i++) {
		const c = line[i] as string;
		if (quote === "'") {
			if (c === "'") quote = undefined;
			else word += c;
			continue;
		}
		if (c === "\\") {
			const next = line[i + 1];
			if (next === undefined) return { error: "a backslash ends the line" };
			word = (word ?? "") + next;
			i++;
			continue;
		}
		if (quote === '"') {
			if (c === '"') quote = undefined;
			else {
				if (c === "$") wordEnv = true;
				word += c;
			}
			continue;
		}
		if (c === '"' || c === "'") {
			quote = c;
			word ??= "";
			continue;
		}
		if (c === "#") break;
		if (c === " " || c === "\t" || c === "\r") {
			end();
			continue;
		}
		word = (word ?? "") + c;
	}
	if (quote !== undefined) return { error: `a ${quote === '"' ? "double" : "single"} quote is not closed` };
	end();
	return { words, env };
}

/** Every section keyword HAProxy knows (a line starting with one opens that section). */
const SECTIONS = new Set([
	"global",
	"defaults",
	"frontend",
	"backend",
	"listen",
	"userlist",
	"peers",
	"resolvers",
	"mailers",
	"program",
	"http-errors",
	"ring",
	"log-forward",
	"cache",
	"crt-store",
	"acme",
	"traces",
	"fcgi-app",
	"namespace_list",
]);

function invalid(file: string, line: number, why: string): CertificateeError {
	return new CertificateeError("HAPROXY_CONFIG_INVALID", `haproxy_config ${file}:${line}: ${why}`, {
		context: { file, field: "haproxy_config" },
		hint: "haproxy_config names the configuration HAProxy runs (haproxy -c -f <file> must accept it); fix the line, or remove haproxy_config from the target",
	});
}

/** One line as words, where it was read, and which word holds an environment variable. */
interface CfgLine {
	kw: string;
	args: string[];
	env: boolean[];
	at: CfgAt;
}

/** A line's value word n (0: the first after the keyword). */
function wordAt(line: CfgLine, n: number): CfgValue | undefined {
	const v = line.args[n];
	return v === undefined ? undefined : { value: v, at: line.at, ...(line.env[n + 1] ? { env: true } : {}) };
}

function base(line: CfgLine): CfgValue {
	const v = wordAt(line, 0);
	if (v === undefined) throw invalid(line.at.file, line.at.line, `${line.kw} needs a directory`);
	return v;
}

/** A line of the global section: only its bases and ssl-load-extra-del-ext are read. */
function globalLine(cfg: HaproxyCfg, line: CfgLine): void {
	if (line.kw === "crt-base") cfg.crtBase = base(line);
	else if (line.kw === "key-base") cfg.keyBase = base(line);
	else if (line.kw === "ssl-load-extra-del-ext") cfg.delExt = line.at;
}

/** A line of a crt-store section: its bases and load lines. */
function storeLine(cfg: HaproxyCfg, store: CfgStore, line: CfgLine): void {
	if (line.kw === "crt-base") store.crtBase = base(line);
	else if (line.kw === "key-base") store.keyBase = base(line);
	else if (line.kw === "load") {
		const { file, line: lineNo } = line.at;
		const load = parseLoad(store.name, line.args, line.env.slice(1), line.at);
		if (typeof load === "string") throw invalid(file, lineNo, load);
		const earlier = cfg.loads.get(load.runtimeName);
		if (earlier !== undefined) {
			throw invalid(
				file,
				lineNo,
				`${load.runtimeName} is loaded twice (also at ${earlier.at.file}:${earlier.at.line})`,
			);
		}
		cfg.loads.set(load.runtimeName, load);
	}
}

/** A section keyword's line: the section it opens (a crt-store is recorded). */
function openSection(cfg: HaproxyCfg, line: CfgLine): CfgStore | undefined {
	if (line.kw !== "crt-store") return undefined;
	const name = line.args[0] ?? "";
	if (cfg.stores.has(name))
		throw invalid(line.at.file, line.at.line, `crt-store "${name}" is declared twice`);
	const store: CfgStore = { name, at: line.at };
	cfg.stores.set(name, store);
	return store;
}

/** Parses the files HAProxy is started with (`-f`, in order). Pure. */
export function parseHaproxyCfg(files: ReadonlyArray<{ path: string; text: string }>): HaproxyCfg {
	const cfg: HaproxyCfg = { files: files.map((f) => f.path), stores: new Map(), loads: new Map() };
	for (const { path, text } of files) {
		let section: string | undefined;
		let store: CfgStore | undefined;
		const ifs: number[] = [];
		for (const [i, raw] of text.split("\n").entries()) {
			const lineNo = i + 1;
			const split = splitWords(raw);
			if ("error" in split) {
				// A line certificatee never reads cannot mislead it; one it reads must split.
				const first = raw.trim().split(/\s+/)[0] ?? "";
				if (SECTIONS.has(first) || relevant(section, first)) throw invalid(path, lineNo, split.error);
				continue;
			}
			const [kw, ...args] = split.words;
			if (kw === undefined) continue;
			if (kw === ".if") ifs.push(lineNo);
			else if (kw === ".endif") ifs.pop();
			if (kw.startsWith(".")) continue;
			const conditional = ifs[ifs.length - 1];
			const at: CfgAt = { file: path, line: lineNo, ...(conditional !== undefined ? { conditional } : {}) };
			const line: CfgLine = { kw, args, env: split.env, at };
			if (SECTIONS.has(kw)) {
				section = kw;
				store = openSection(cfg, line);
			} else if (section === "global") globalLine(cfg, line);
			else if (store !== undefined) storeLine(cfg, store, line);
		}
	}
	return cfg;
}

/** Lines of a section certificatee reads. */
function relevant(section: string | undefined, kw: string): boolean {
	if (section === "global") return kw === "crt-base" || kw === "key-base";
	return section === "crt-store";
}

/** `load crt <f> [key <f>] [alias <a>] [acme <s>] [<keyword> <value>]...`: every keyword takes one value. */
function parseLoad(store: string, args: string[], env: boolean[], at: CfgAt): CfgLoad | string {
	const kv = new Map<string, CfgValue>();
	for (let i = 0; i < args.length; i += 2) {
		const k = args[i] as string;
		const v = args[i + 1];
		if (v === undefined) return `load: "${k}" has no value`;
		kv.set(k, { value: v, at, ...(env[i + 1] ? { env: true } : {}) });
	}
	const crt = kv.get("crt");
	if (crt === undefined) return "load has no crt";
	const alias = kv.get("alias")?.value;
	const key = kv.get("key");
	const acme = kv.get("acme")?.value;
	return {
		store,
		runtimeName: `@${store}/${alias ?? crt.value}`,
		crt,
		...(key ? { key } : {}),
		...(acme ? { acme } : {}),
		at,
	};
}

/** `file:line`, and the `.if` around it. */
export function where(at: CfgAt): string {
	return `${at.file}:${at.line}${at.conditional !== undefined ? ` (inside the .if of line ${at.conditional})` : ""}`;
}

/**
 * A file name of a load made absolute against the base that applies (the store's, else global's), or why it
 * cannot be: HAProxy resolves what no absolute base covers against its working directory, which is not known.
 */
export function resolveAgainst(
	spelled: CfgValue,
	bases: ReadonlyArray<CfgValue | undefined>,
	keyword: "crt-base" | "key-base",
): string | { unknown: string } {
	if (spelled.env)
		return {
			unknown: `${where(spelled.at)} spells it with an environment variable ("${spelled.value}"), which HAProxy expands from its own environment`,
		};
	if (spelled.at.conditional !== undefined)
		return {
			unknown: `${where(spelled.at)} declares it inside a .if block, which certificatee does not evaluate`,
		};
	if (isAbsolute(spelled.value)) return normalize(spelled.value);
	const base = bases.find((b) => b !== undefined);
	if (base === undefined) {
		return {
			unknown: `${where(spelled.at)} names "${spelled.value}" relative to no ${keyword} (HAProxy's working directory, which certificatee does not know)`,
		};
	}
	if (base.env || base.at.conditional !== undefined || !isAbsolute(base.value)) {
		return {
			unknown: `its ${keyword} at ${where(base.at)} ("${base.value}") is not an absolute directory certificatee can read`,
		};
	}
	return normalize(join(base.value, spelled.value));
}

/** Read once per change of the files (stat), by the list of paths. */
export type HaproxyCfgCache = { stamp: string; cfg: HaproxyCfg } | undefined;

/** Reads and parses the configured files; HAPROXY_CONFIG_INVALID names the file (and line) that fails. */
export async function readHaproxyCfg(
	paths: readonly string[],
	cache: { entry?: HaproxyCfgCache },
	endpoint: string,
): Promise<HaproxyCfg> {
	const unreadable = (path: string) => (e: NodeJS.ErrnoException) => {
		throw new CertificateeError(
			"HAPROXY_CONFIG_INVALID",
			`${endpoint}: haproxy_config ${path} cannot be read: ${e.code ?? e.message}`,
			{
				context: { endpoint, target: endpoint, file: path, field: "haproxy_config" },
				hint: "name the configuration file HAProxy runs (readable by certificatee's user), or remove haproxy_config",
				cause: e,
			},
		);
	};
	const stamps = await Promise.all(
		paths.map(async (p) => {
			const s = await stat(p).catch(unreadable(p));
			return `${p}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
		}),
	);
	const stamp = stamps.join("|");
	if (cache.entry?.stamp === stamp) return cache.entry.cfg;
	const files = await Promise.all(
		paths.map(async (path) => ({ path, text: await readFile(path, "utf8").catch(unreadable(path)) })),
	);
	try {
		const cfg = parseHaproxyCfg(files);
		cache.entry = { stamp, cfg };
		return cfg;
	} catch (e) {
		if (e instanceof CertificateeError) {
			throw new CertificateeError(e.code, `${endpoint}: ${e.message}`, {
				context: { ...e.context, endpoint, target: endpoint },
				...(e.hint ? { hint: e.hint } : {}),
			});
		}
		throw e;
	}
}
