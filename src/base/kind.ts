/**
 * What a kind of source or target declares of itself, below the configuration: its schema, its role, how its
 * local paths are resolved, its endpoints, and what the rules across entries ask of it. One entry per kind, in
 * its folder's `kind.ts`, listed once in `sources/kinds.ts` or `targets/kinds.ts`; what a kind builds and
 * checks online (code that reaches disks and networks) is in `sources/registry.ts` and `targets/registry.ts`.
 */
import type { z } from "zod";

/** Makes a kind's local paths absolute: files against the configuration file's directory, commands named by a path too. */
export interface PathResolver {
	file(path: string): string;
	/** `./hooks/dns.sh` is a file; a bare name (`nsupdate`) is left to PATH. */
	command(argv: readonly string[]): string[];
}

/** A source or target entry as written, before its schema checked it: the rules across entries read it so. */
export type RawEntry = Readonly<Record<string, unknown>>;

/** A problem the rules across entries report, its path relative to the entry (`http_address`, `endpoints[0].url`). */
export interface EntryProblem {
	field: string;
	message: string;
}

interface KindBase<T extends string, S extends z.ZodType> {
	type: T;
	schema: S;
	/** Its options that name local files, made absolute (the input is not changed); absent: it names none. */
	resolvePaths?(config: z.output<S>, paths: PathResolver): z.output<S>;
}

/** A kind of source: it reads ready-made certificates (`source`) or makes them (`issuer`). */
export interface SourceKind<T extends string = string, S extends z.ZodType = z.ZodType>
	extends KindBase<T, S> {
	role: "source" | "issuer";
	/**
	 * An issuer that proves control of names (ACME): for the names it cannot prove, what to set instead.
	 * `wildcard`: a wildcard name (DNS-01 only); `ip`: an IP address (HTTP-01 only, RFC 8738). Absent: it proves
	 * nothing and issues any name (a local CA). `at` is the entry's path (`sources[2]`).
	 */
	proofs?(raw: RawEntry, at: string): { wildcard?: string; ip?: string };
	/** Its orders carry a CA profile (`certificates[].profile`, draft-ietf-acme-profiles). */
	profiles?: boolean;
	/** Its orders are counted in `certificatee_acme_orders_total`. */
	countsOrders?: boolean;
	/** The targets it answers HTTP-01 challenges through (HAProxy maps), as written; absent: none. */
	challengeMaps?(raw: RawEntry): { field: string; targets: readonly unknown[]; map: unknown } | undefined;
}

/** One endpoint of a target, as its reports name it. */
export interface KindEndpoint {
	target: string;
	endpoint: string;
	/**
	 * true: a process every cluster member reaches (a HAProxy node), pushed by the member that owns it; false:
	 * on the machine of the process that runs it (a directory), so every member writes its own.
	 */
	shared: boolean;
}

/** A kind of target: where certificates go. */
export interface TargetKind<T extends string = string, S extends z.ZodType = z.ZodType>
	extends KindBase<T, S> {
	role: "target";
	/** The endpoints a target of this kind runs each cycle, as its reports name them. */
	endpoints(config: z.output<S>): KindEndpoint[];
	/** Its endpoints take part in canary rollouts (`rollout.targets`); a directory has nothing to stage. */
	rollout: boolean;
	/**
	 * Its nodes hold HTTP-01 answers in HAProxy maps (`http01: { via: haproxy-map }`): for each node that does not
	 * say where it serves port 80, the problem. Absent: the kind holds no challenge maps.
	 */
	challengeMaps?: { unaddressed(raw: RawEntry, name: string, by: string): EntryProblem[] };
}

/** The kinds' schemas in the kinds' order, typed as a tuple: what `z.discriminatedUnion` takes. */
export function schemasOf<const T extends readonly [{ schema: z.ZodType }, ...Array<{ schema: z.ZodType }>]>(
	kinds: T,
): { -readonly [I in keyof T]: T[I]["schema"] } {
	return kinds.map((k) => k.schema) as { -readonly [I in keyof T]: T[I]["schema"] };
}
