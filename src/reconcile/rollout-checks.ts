/**
 * A rollout's checks on one canary endpoint, after its writes: what HAProxy serves, by TLS probes by SNI. `serial`
 * (every DNS name serves the new leaf), `chain` (the intermediates served are the bundle's), `key-types` (where an
 * RSA and an ECDSA certificate share a name, an ECDSA-only client gets the ECDSA one and an RSA-only client the
 * RSA one), `trust` (the served chain verifies against the trust store). One result per check.
 */
import { certificatesOf, verifyChain } from "../certificates/trust.js";
import { describeError } from "../errors.js";
import type { DesiredCertificate, ServedCertificate, ServedProbe } from "./model.js";
import type { CheckResult, RolloutCheck, VerifySpec } from "./rollout-view.js";

export async function verifyCanary(input: {
	endpoint: string;
	certificate: DesiredCertificate;
	desired: readonly DesiredCertificate[];
	spec: VerifySpec;
	probe: ServedProbe | undefined;
	signal: AbortSignal;
	now: Date;
}): Promise<CheckResult[]> {
	const { certificate, spec, endpoint } = input;
	const name = certificate.name;
	const leaf = certificate.bundle.leaf;
	const snis = leaf.dnsNames.filter((n) => !n.startsWith("*."));
	const result = (check: RolloutCheck, failure?: CheckFailure) =>
		failure ? { certificate: name, check, ok: false, ...failure } : { certificate: name, check, ok: true };
	if (input.probe === undefined || snis.length === 0)
		return spec.checks.map((check) =>
			result(check, {
				code: "ROLLOUT_UNVERIFIABLE",
				message: `${name} on canary ${endpoint}: ${input.probe === undefined ? "the endpoint has no probe address" : "the certificate has no DNS name to probe by SNI"}: a canary is verified by what it serves`,
				hint: "configure probe (host:port of the TLS bind) on every endpoint of the rollout",
			}),
		);
	const probe = input.probe;
	const keyType = leaf.keyType === "rsa" || leaf.keyType === "ec" ? leaf.keyType : undefined;
	const served: Array<{ sni: string; got?: ServedCertificate; error?: string }> = [];
	for (const sni of snis) {
		try {
			served.push({ sni, got: await probe(sni, input.signal, keyType) });
		} catch (e) {
			served.push({ sni, error: describeError(e) });
		}
	}
	const out: CheckResult[] = [];
	for (const check of spec.checks) {
		out.push(result(check, await failureOf(check, { ...input, probe, served })));
	}
	return out;
}

/** Why a check failed, as its result carries it. */
interface CheckFailure {
	code: string;
	message: string;
	hint?: string;
}

/** What every check reads: the canary's input, what each DNS name served, and the prefix of its messages. */
type CanaryProbes = Parameters<typeof verifyCanary>[0] & {
	probe: ServedProbe;
	served: Array<{ sni: string; got?: ServedCertificate; error?: string }>;
	/** `<certificate> on canary <endpoint>`. */
	at: string;
};

type CheckRule = (canary: CanaryProbes) => Promise<CheckFailure | undefined> | CheckFailure | undefined;

/** Each check's rule; all but key-types (which probes again, per client) first need every name to have answered. */
const CHECKS: Record<RolloutCheck, CheckRule> = {
	serial: (canary) => handshakeFailure(canary) ?? serialFailure(canary),
	chain: (canary) => handshakeFailure(canary) ?? chainFailure(canary),
	trust: (canary) => handshakeFailure(canary) ?? trustFailure(canary),
	"key-types": keyTypeFailure,
};

async function failureOf(
	check: RolloutCheck,
	input: Omit<CanaryProbes, "at">,
): Promise<CheckFailure | undefined> {
	return CHECKS[check]({ ...input, at: `${input.certificate.name} on canary ${input.endpoint}` });
}

function handshakeFailure({ served, at }: CanaryProbes): CheckFailure | undefined {
	const unreachable = served.find((s) => s.got === undefined);
	return unreachable
		? {
				code: "ROLLOUT_HANDSHAKE_FAILED",
				message: `${at}: the probe of ${unreachable.sni} failed: ${unreachable.error}`,
				hint: "check that the canary serves the name (its probe address, its bind and crt-list)",
			}
		: undefined;
}

function serialFailure({ certificate, served, at }: CanaryProbes): CheckFailure | undefined {
	const leaf = certificate.bundle.leaf;
	const wrong = served.find((s) => s.got?.serial !== leaf.serial);
	return wrong
		? {
				code: "ROLLOUT_SERIAL_MISMATCH",
				message: `${at}: ${wrong.sni} serves serial ${wrong.got?.serial}, want ${leaf.serial}`,
				hint: "another certificate wins the name on the canary (see its shadowed and ambiguous refs), or the write did not take",
			}
		: undefined;
}

function chainFailure({ certificate, served, at }: CanaryProbes): CheckFailure | undefined {
	const want = certificate.bundle.chain.map((c) => c.fingerprint);
	const wrong = served.find(
		(s) =>
			s.got?.chain !== undefined &&
			(s.got.chain.length !== want.length || s.got.chain.some((f, i) => f !== want[i])),
	);
	return wrong
		? {
				code: "ROLLOUT_CHAIN_MISMATCH",
				message: `${at}: ${wrong.sni} serves ${wrong.got?.chain?.length} intermediate(s) other than the bundle's ${want.length}`,
				hint: "HAProxy completes or replaces the chain (issuers-chain-path, a .issuer file): make the bundle carry the chain to serve",
			}
		: undefined;
}

function trustFailure({ spec, served, now, at }: CanaryProbes): CheckFailure | undefined {
	if (spec.trust === undefined)
		return {
			code: "ROLLOUT_NO_TRUST_STORE",
			message: `${at}: the trust check needs a trust store`,
			hint: "set rollout.trust_store (a PEM bundle or system), or leave trust out of rollout.verify",
		};
	for (const s of served) {
		const chain = certificatesOf((s.got?.presented ?? []).join(""));
		const verdict = verifyChain(chain, spec.trust, now, `${at}: ${s.sni} serves a chain that`);
		if (!verdict.ok)
			return {
				code: "ROLLOUT_CHAIN_UNTRUSTED",
				message: `${verdict.code}: ${verdict.message}`,
				hint: verdict.hint,
			};
	}
	return undefined;
}

/** Where an RSA and an ECDSA certificate share a name, each key type's client must get its own. */
async function keyTypeFailure(canary: CanaryProbes): Promise<CheckFailure | undefined> {
	const { certificate, served } = canary;
	const mine = certificate.bundle.leaf.keyType;
	if (mine !== "rsa" && mine !== "ec") return undefined;
	for (const s of served) {
		// A desired certificate of the other key type for this name: both must be served, each to its client.
		const twin = canary.desired.find(
			(d) =>
				d.name !== certificate.name &&
				d.bundle.leaf.keyType === (mine === "rsa" ? "ec" : "rsa") &&
				d.bundle.leaf.dnsNames.includes(s.sni),
		);
		if (twin === undefined) continue;
		const ec = mine === "ec" ? certificate : twin;
		const rsa = mine === "rsa" ? certificate : twin;
		for (const [client, want] of [
			["ec-only", ec],
			["rsa", rsa],
		] as const) {
			const failure = await clientMismatch(canary, s.sni, client, want);
			if (failure) return failure;
		}
	}
	return undefined;
}

/** Probes `sni` as a client of one key type only; a failure unless it gets `want`'s serial. */
async function clientMismatch(
	{ probe, signal, at }: CanaryProbes,
	sni: string,
	client: "ec-only" | "rsa",
	want: DesiredCertificate,
): Promise<CheckFailure | undefined> {
	let got: string;
	try {
		got = (await probe(sni, signal, client)).serial;
	} catch (e) {
		got = describeError(e);
	}
	return got !== want.bundle.leaf.serial
		? {
				code: "ROLLOUT_KEY_TYPE_MISMATCH",
				message: `${at}: an ${client === "rsa" ? "RSA" : "ECDSA"}-only client asking for ${sni} gets ${got}, want ${want.name} (serial ${want.bundle.leaf.serial})`,
				hint: "both certificates of the name must be on the canary, each of its key type: see the endpoint's refs and unmanaged twins",
			}
		: undefined;
}
