/**
 * `validate --online`'s warning for a configured certificate that HAProxy's own ACME client also manages: two
 * ACME clients for one certificate. Both HAProxy target kinds find the managed certificates their own way (the
 * runtime socket's `acme status`, the Data Plane API's crt_loads) and word the warning here, once.
 */

/** A certificate HAProxy's ACME client manages: its runtime name, its `acme` section and the names it covers. */
export interface AcmeManaged {
	runtimeName: string;
	section: string;
	names: readonly string[];
}

export function acmeOverlapWarnings(
	managed: readonly AcmeManaged[],
	certificates: ReadonlyArray<{ name: string; domains: readonly string[] }>,
): string[] {
	return managed.flatMap((m) => {
		const names = m.names.map((n) => n.toLowerCase());
		return certificates.flatMap((c) => {
			const shared = c.domains.filter((d) => names.includes(d.toLowerCase()));
			return shared.length === 0
				? []
				: [
						`certificate "${c.name}" (${shared.join(", ")}) is also managed by HAProxy's own ACME client: ${m.runtimeName}, acme section "${m.section}"; certificatee never writes it (MANAGED_BY_HAPROXY_ACME). Keep one ACME client per certificate`,
					];
		});
	});
}
