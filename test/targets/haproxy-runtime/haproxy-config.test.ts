/**
 * haproxy_config's reader (haproxy-config.ts): HAProxy's word splitting, the global and crt-store lines it
 * reads, the runtime names of loads, and clear errors naming file and line.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
	parseHaproxyCfg,
	readHaproxyCfg,
	resolveAgainst,
	splitWords,
} from "../../../src/targets/haproxy-runtime/haproxy-config.js";

const parse = (text: string) => parseHaproxyCfg([{ path: "/etc/haproxy/haproxy.cfg", text }]);

describe("haproxy_config: words as HAProxy splits them", () => {
	it.each([
		["load crt a.crt key a.key", ["load", "crt", "a.crt", "key", "a.key"]],
		['load crt "my cert.crt" alias "site-a"', ["load", "crt", "my cert.crt", "alias", "site-a"]],
		["load crt 'x y.crt'  # comment", ["load", "crt", "x y.crt"]],
		["crt-base /etc/my\\ certs", ["crt-base", "/etc/my certs"]],
		['load crt "a\\"b.crt"', ["load", "crt", 'a"b.crt']],
		["\tload\tcrt a#b", ["load", "crt", "a"]],
		['alias ""', ["alias", ""]],
		["crt a'b c'd", ["crt", "ab cd"]],
	])("%s", (line, words) => {
		const split = splitWords(line);
		expect("words" in split && split.words).toEqual(words);
	});

	it("an environment variable is marked inside double quotes only (HAProxy expands it there)", () => {
		const braced = "$" + "{CERTS}"; // HAProxy's own syntax, not a template
		expect(splitWords(`crt-base "${braced}"`)).toEqual({
			words: ["crt-base", braced],
			env: [false, true],
		});
		expect(splitWords("crt-base '$CERTS'")).toEqual({ words: ["crt-base", "$CERTS"], env: [false, false] });
	});

	it("an unclosed quote is an error", () => {
		expect(splitWords('load crt "a.crt')).toEqual({ error: "a double quote is not closed" });
	});
});

describe("haproxy_config: global and crt-store sections", () => {
	const cfg = parse(
		[
			"global",
			"    log stderr local0 # crt-base /not/this",
			"    crt-base /etc/haproxy/certs",
			"    key-base /etc/haproxy/keys",
			"    ssl-load-extra-del-ext",
			"",
			"crt-store web",
			'    crt-base "/srv/web certs"',
			"    key-base /srv/web-keys",
			'    load crt "a.crt" key "a.key" alias "site-a"',
			"    load crt b.pem",
			"crt-store",
			'    load crt "c.crt" key c.key alias c acme LE domains "c.example,www.c.example"',
			"frontend fe",
			"    bind :443 ssl crt @web/site-a",
			"    crt-base /ignored # not a frontend keyword certificatee reads",
		].join("\n"),
	);

	it("reads the global bases and ssl-load-extra-del-ext with their lines", () => {
		expect(cfg.crtBase).toMatchObject({ value: "/etc/haproxy/certs", at: { line: 3 } });
		expect(cfg.keyBase).toMatchObject({ value: "/etc/haproxy/keys", at: { line: 4 } });
		expect(cfg.delExt).toMatchObject({ line: 5 });
	});

	it("names each load as the runtime does: @store/alias, else @store/crt; the unnamed store is @/", () => {
		expect([...cfg.loads.keys()].sort()).toEqual(["@/c", "@web/b.pem", "@web/site-a"]);
		expect(cfg.loads.get("@web/site-a")).toMatchObject({
			store: "web",
			crt: { value: "a.crt" },
			key: { value: "a.key" },
			at: { file: "/etc/haproxy/haproxy.cfg", line: 10 },
		});
		expect(cfg.loads.get("@web/b.pem")?.key).toBeUndefined();
		expect(cfg.loads.get("@/c")?.acme).toBe("LE");
		expect(cfg.stores.get("web")).toMatchObject({
			crtBase: { value: "/srv/web certs" },
			keyBase: { value: "/srv/web-keys" },
		});
		// The frontend's crt-base line is not the store's.
		expect(cfg.stores.get("")?.crtBase).toBeUndefined();
	});

	it("resolves against the store's base, else global's; a relative name with no base is unknown", () => {
		const load = cfg.loads.get("@web/site-a");
		if (load === undefined) throw new Error("no load");
		expect(resolveAgainst(load.crt, [cfg.stores.get("web")?.crtBase, cfg.crtBase], "crt-base")).toBe(
			"/srv/web certs/a.crt",
		);
		const c = cfg.loads.get("@/c");
		if (c?.key === undefined) throw new Error("no load");
		expect(resolveAgainst(c.key, [cfg.stores.get("")?.keyBase, cfg.keyBase], "key-base")).toBe(
			"/etc/haproxy/keys/c.key",
		);
		expect(resolveAgainst(c.key, [undefined, undefined], "key-base")).toEqual({
			unknown: expect.stringContaining('/etc/haproxy/haproxy.cfg:13 names "c.key" relative to no key-base'),
		});
	});

	it("a value HAProxy takes from its environment or from inside a .if block is unknown, naming the line", () => {
		const odd = parse(
			[
				"crt-store s",
				`    crt-base "$${"{CERTS}"}"`,
				"    load crt a.crt",
				".if defined(X)",
				"    load crt /abs/b.crt",
				".endif",
			].join("\n"),
		);
		const a = odd.loads.get("@s/a.crt");
		const b = odd.loads.get("@s/b.crt") ?? odd.loads.get("@s//abs/b.crt");
		if (a === undefined || b === undefined) throw new Error(JSON.stringify([...odd.loads.keys()]));
		expect(resolveAgainst(a.crt, [odd.stores.get("s")?.crtBase], "crt-base")).toEqual({
			unknown: expect.stringContaining("crt-base at /etc/haproxy/haproxy.cfg:2"),
		});
		expect(resolveAgainst(b.crt, [], "crt-base")).toEqual({
			unknown: expect.stringContaining("haproxy.cfg:5 (inside the .if of line 4)"),
		});
	});

	it.each([
		['crt-store web\n    load crt "a.crt', "haproxy.cfg:2: a double quote is not closed"],
		["crt-store web\n    load key a.key", "haproxy.cfg:2: load has no crt"],
		["crt-store web\n    load crt a.crt alias", 'haproxy.cfg:2: load: "alias" has no value'],
		[
			"crt-store web\n    load crt a.crt\n    load crt a.crt",
			"@web/a.crt is loaded twice (also at /etc/haproxy/haproxy.cfg:2)",
		],
		["crt-store w\ncrt-store w", 'crt-store "w" is declared twice'],
		["global\n    crt-base", "haproxy.cfg:2: crt-base needs a directory"],
	])("refuses %j, naming the line", (text, message) => {
		expect(() => parse(text)).toThrow(
			expect.objectContaining({ code: "HAPROXY_CONFIG_INVALID", message: expect.stringContaining(message) }),
		);
	});

	it("a broken line outside what it reads is no error (HAProxy's own check reports it)", () => {
		expect(
			parse('frontend fe\n    http-request return string "x\ncrt-store s\n    load crt /a.crt').loads.has(
				"@s//a.crt",
			),
		).toBe(true);
	});

	it("several files: sections do not run on from one file into the next", () => {
		const two = parseHaproxyCfg([
			{ path: "/a.cfg", text: "crt-store s\n    crt-base /x" },
			{ path: "/b.cfg", text: "    load crt a.crt\ncrt-store t\n    load crt b.crt" },
		]);
		expect([...two.loads.keys()]).toEqual(["@t/b.crt"]);
	});
});

describe("haproxy_config: reading the files", () => {
	const dirs: string[] = [];
	afterAll(async () => {
		for (const d of dirs) await rm(d, { recursive: true, force: true });
	});

	it("a missing file is HAPROXY_CONFIG_INVALID naming the endpoint and the file; a changed file is read again", async () => {
		const dir = await mkdtemp(join(tmpdir(), "certificatee-cfg-"));
		dirs.push(dir);
		const path = join(dir, "haproxy.cfg");
		const cache = {};
		await expect(readHaproxyCfg([path], cache, "lb1")).rejects.toMatchObject({
			code: "HAPROXY_CONFIG_INVALID",
			message: expect.stringMatching(new RegExp(`^lb1: haproxy_config ${path} cannot be read: ENOENT`)),
		});
		await writeFile(path, "crt-store s\n    load crt /a.crt\n");
		expect([...(await readHaproxyCfg([path], cache, "lb1")).loads.keys()]).toEqual(["@s//a.crt"]);
		await writeFile(path, "crt-store s\n    load crt /a.crt alias a\n    load crt /b.crt\n");
		expect([...(await readHaproxyCfg([path], cache, "lb1")).loads.keys()]).toEqual(["@s/a", "@s//b.crt"]);
		await writeFile(path, 'crt-store s\n    load crt "/a.crt\n');
		await expect(readHaproxyCfg([path], cache, "lb1")).rejects.toMatchObject({
			message: `lb1: haproxy_config ${path}:2: a double quote is not closed`,
		});
	});
});
