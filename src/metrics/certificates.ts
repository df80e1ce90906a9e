/** What each certificate is and where it is: expiry and lifetime, the refs holding it, what is served and what is not. */
import type { Registry } from "prom-client";
import { certificateOnEndpoint } from "../reconcile/convergence.js";
import { type LastCycle, scrapeGauges, seconds } from "./last-cycle.js";
import { refsAfterCycle } from "./refs.js";

export function registerCertificateMetrics(registry: Registry, cycle: LastCycle): void {
	const gauge = scrapeGauges(registry);
	gauge(
		"certificatee_certificate_not_after_timestamp_seconds",
		"Expiry of each desired certificate.",
		["certificate"],
		(g) => {
			for (const c of cycle.report()?.certificates ?? []) g.set({ certificate: c.name }, seconds(c.notAfter));
		},
	);
	gauge(
		"certificatee_certificate_lifetime_seconds",
		"Lifetime (notAfter - notBefore) of each desired certificate; the expiry alerts scale with it.",
		["certificate"],
		(g) => {
			for (const c of cycle.report()?.certificates ?? [])
				g.set({ certificate: c.name }, seconds(c.notAfter) - seconds(c.notBefore));
		},
	);
	gauge(
		"certificatee_ref_not_after_timestamp_seconds",
		"Expiry of every ref an endpoint holds after the cycle's writes, unmanaged ones included.",
		["target", "endpoint", "ref", "class"],
		(g) => {
			for (const e of cycle.endpoints())
				for (const r of refsAfterCycle(e, cycle.report()?.certificates ?? []))
					g.set({ target: e.target, endpoint: e.endpoint, ref: r.ref, class: r.class }, seconds(r.notAfter));
		},
	);
	gauge(
		"certificatee_ref_in_sync",
		"1 when the certificate's canonical ref holds the desired certificate in storage and runtime.",
		["target", "endpoint", "certificate"],
		(g) => {
			for (const e of cycle.endpoints()) {
				if (!e.ok) continue;
				for (const v of e.verdicts) {
					if (!("certificate" in v) || v.certificate === undefined || !("ref" in v)) continue;
					const c = certificateOnEndpoint(e, v.certificate);
					if (c === undefined) continue;
					g.set({ target: e.target, endpoint: e.endpoint, certificate: v.certificate }, c.refInSync ? 1 : 0);
				}
			}
		},
	);
	registerServedMetrics(registry, cycle);
}

/** What HAProxy serves by name, and what certificatee keeps from a target. */
function registerServedMetrics(registry: Registry, cycle: LastCycle): void {
	const gauge = scrapeGauges(registry);
	gauge(
		"certificatee_served_serial_match",
		"1 when a TLS probe by SNI sees the desired certificate's serial.",
		["target", "endpoint", "sni"],
		(g) => {
			for (const e of cycle.endpoints()) {
				// One name can have a certificate per key type (RSA and ECDSA): 1 only when every one is served.
				const match = new Map<string, boolean>();
				for (const s of e.served) match.set(s.sni, (match.get(s.sni) ?? true) && s.match);
				for (const [sni, ok] of match) g.set({ target: e.target, endpoint: e.endpoint, sni }, ok ? 1 : 0);
			}
		},
	);
	gauge(
		"certificatee_shadowed_names",
		"1 per SNI name HAProxy serves (or, planned, will serve) from another ref than the desired certificate's; served_by names the culprit.",
		["target", "endpoint", "sni", "certificate", "served_by"],
		(g) => {
			for (const e of cycle.endpoints())
				for (const v of e.verdicts)
					if (v.class === "shadowed")
						g.set(
							{
								target: e.target,
								endpoint: e.endpoint,
								sni: v.sni,
								certificate: v.certificate,
								served_by: v.servedBy ?? "unknown",
							},
							1,
						);
		},
	);
	gauge(
		"certificatee_chain_untrusted",
		"1 per certificate whose chain does not verify against the target's trust_store (CHAIN_UNTRUSTED, CHAIN_BROKEN, CHAIN_EXPIRED in code): never pushed to that target.",
		["target", "certificate", "code"],
		(g) => {
			for (const e of cycle.endpoints())
				for (const h of e.held ?? [])
					if (h.kind === "trust") g.set({ target: e.target, certificate: h.certificate, code: h.code }, 1);
		},
	);
}
