/**
 * HAProxy targets on the harness's real HAProxy (and the Data Plane API double), for reconcile tests: build a
 * haproxy-runtime or haproxy-dataplane target pointed at a started HAProxy, run one cycle, and tear down what
 * a test started, last started first, with the reload-safety invariant where the file asks for it.
 *
 *   const r = rig({ reloadSafe: true });     // afterEach: close targets, check doubles, invariant, stop
 *   const h = await r.haproxy({ crtDir });
 *   const t = r.dataplane(h, await r.dpapi(h), { crt_list: h.crtListPath });
 *   const e = await syncOnce(t, want);
 */
import { afterEach, expect } from "vitest";
import type { z } from "zod";
import { probeServed } from "../../src/probe/index.js";
import type { DesiredCertificate } from "../../src/reconcile/model.js";
import type { EndpointReport } from "../../src/reconcile/report.js";
import { dataplaneTargetSchema } from "../../src/targets/haproxy-dataplane/schema.js";
import { runtimeTargetSchema } from "../../src/targets/haproxy-runtime/schema.js";
import { type BuiltTarget, buildTarget, type TargetDeps } from "../../src/targets/registry.js";
import { type DpapiDouble, type DpapiDoubleOptions, startDpapiDouble } from "./dpapi-double/index.js";
import { type Haproxy, type HaproxyOptions, startHaproxy } from "./haproxy.js";
import { stopReloadSafe } from "./invariant.js";

/** haproxy-runtime target fields a test may set (the rest come from `h`). */
export type RuntimeOverrides = Partial<z.input<typeof runtimeTargetSchema>>;
/** haproxy-dataplane target fields a test may set (its one endpoint comes from `h` and `d`). */
export type DataplaneOverrides = Partial<z.input<typeof dataplaneTargetSchema>>;

const deps = (extra: Partial<TargetDeps>): TargetDeps => ({ now: () => new Date(), ...extra });

/** A haproxy-runtime target on `h`'s stats socket and crt directory, probing `h`'s TLS bind. */
export function runtimeTarget(
	h: Haproxy,
	overrides: RuntimeOverrides = {},
	extra: Partial<TargetDeps> = {},
): BuiltTarget {
	const config = runtimeTargetSchema.parse({
		name: "lb1",
		type: "haproxy-runtime",
		socket: h.adminSocket,
		crt_dir: h.crtDir,
		probe: h.address,
		...overrides,
	});
	return buildTarget(config, deps(extra));
}

/** A haproxy-dataplane target with one endpoint, the double `d` in front of `h`, storing in `h`'s crt directory. */
export function dataplaneTarget(
	h: Haproxy,
	d: DpapiDouble,
	overrides: DataplaneOverrides = {},
	extra: Partial<TargetDeps> = {},
): BuiltTarget {
	const config = dataplaneTargetSchema.parse({
		name: "fra",
		type: "haproxy-dataplane",
		storage_dir: h.crtDir,
		endpoints: [
			{
				name: "fra1",
				url: d.url,
				username: d.username,
				password: d.password,
				probe: h.address,
				...(d.masterRuntime ? { master_runtime: true } : {}),
			},
		],
		...overrides,
	});
	return buildTarget(config, deps(extra));
}

export interface Rig {
	/** A HAProxy, stopped at teardown (after the reload-safety invariant when the rig checks it). */
	haproxy(options?: HaproxyOptions): Promise<Haproxy>;
	/** The Data Plane API double in front of `h`; at teardown it must have stayed on spec, then it closes. */
	dpapi(h: Haproxy, options?: Omit<DpapiDoubleOptions, "haproxy">): Promise<DpapiDouble>;
	runtime(h: Haproxy, overrides?: RuntimeOverrides, extra?: Partial<TargetDeps>): BuiltTarget;
	dataplane(
		h: Haproxy,
		d: DpapiDouble,
		overrides?: DataplaneOverrides,
		extra?: Partial<TargetDeps>,
	): BuiltTarget;
	/** Anything else to release at teardown (a check client, a temp directory), in the same order. */
	onTeardown(release: () => Promise<void> | void): void;
}

/**
 * Tracks what each test starts and, in `afterEach`, releases it last started first: targets closed, doubles
 * checked for spec violations and closed, then each HAProxy checked with `assertReloadSafe` (with
 * `reloadSafe: true`) and stopped. Every step runs even when one before it throws; the first error fails the test.
 */
export function rig(options: { reloadSafe?: boolean } = {}): Rig {
	const started: Array<() => Promise<void> | void> = [];
	afterEach(async () => {
		let failure: unknown;
		for (const release of started.splice(0).reverse()) {
			try {
				await release();
			} catch (e) {
				failure ??= e;
			}
		}
		if (failure !== undefined) throw failure;
	});
	const track = <T extends BuiltTarget>(t: T): T => {
		started.push(() => t.close());
		return t;
	};
	return {
		async haproxy(haproxyOptions = {}) {
			const h = await startHaproxy(haproxyOptions);
			started.push(() => (options.reloadSafe ? stopReloadSafe(h) : h.stop()));
			return h;
		},
		async dpapi(h, doubleOptions = {}) {
			const d = await startDpapiDouble({ haproxy: h, ...doubleOptions });
			started.push(async () => {
				try {
					d.assertSpecClean();
				} finally {
					await d.close();
				}
			});
			return d;
		},
		runtime: (h, overrides, extra) => track(runtimeTarget(h, overrides, extra)),
		dataplane: (h, d, overrides, extra) => track(dataplaneTarget(h, d, overrides, extra)),
		onTeardown(release) {
			started.push(release);
		},
	};
}

/** One sync cycle; the report of the target's first endpoint. `expectOk` fails the test, with the error, unless ok. */
export async function syncOnce(
	t: BuiltTarget,
	want: DesiredCertificate[],
	options: { expectOk?: boolean } = {},
): Promise<EndpointReport> {
	const report = await t.run(want, "sync", new AbortController().signal);
	const e = report.endpoints[0] as EndpointReport;
	if (options.expectOk) expect(e.ok, JSON.stringify(e.error)).toBe(true);
	return e;
}

/** The writes a cycle did, as `<op> <ref>`. */
export const okWrites = (e: EndpointReport): string[] =>
	e.steps.filter((s) => s.result === "ok").map((s) => `${s.op} ${s.ref}`);

/** The serial `h` serves for `sni` (to a client that picks `keyType`, when given). */
export const servedSerial = async (h: Haproxy, sni: string, keyType?: "rsa" | "ec"): Promise<string> =>
	(await probeServed({ address: h.address, sni, ...(keyType ? { keyType } : {}) })).serial;
