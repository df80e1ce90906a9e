/** The CA's suggested renewal window for a certificate (ARI, RFC 9773), read from its renewalInfo resource. */
import { CertificateeError } from "../../errors.js";
import type { RenewalWindow } from "../types.js";
import { ariCertId, parseRenewalInfo } from "./ari.js";
import type { IssuerContext } from "./issuer-context.js";
import { describeProblem, toAcmeError } from "./problem.js";
import { acmeRequest, type TransportContext } from "./transport.js";

/** The CA's suggested renewal window (ARI), or undefined when it has no renewalInfo or no window for it. */
export async function fetchRenewalWindow(
	{ transport, directoryUrl }: IssuerContext,
	certPem: string,
	signal: AbortSignal,
): Promise<RenewalWindow | undefined> {
	const ctx: TransportContext = { signal, problems: [] };
	const operation = "renewal info";
	try {
		const dir = await acmeRequest(transport, ctx, directoryUrl, "get");
		const base = (dir.data as { renewalInfo?: unknown } | null)?.renewalInfo;
		if (dir.status !== 200) {
			throw new CertificateeError(
				"ACME_ERROR",
				`ACME directory ${directoryUrl} answered HTTP ${dir.status}`,
				{
					context: { endpoint: directoryUrl, operation, status: dir.status },
					retryable: true,
				},
			);
		}
		if (typeof base !== "string") return undefined;
		const url = `${base.replace(/\/+$/, "")}/${ariCertId(certPem)}`;
		const res = await acmeRequest(transport, ctx, url, "get");
		if (res.status === 404) return undefined;
		if (res.status !== 200) {
			const problem = ctx.problems.at(-1);
			throw new CertificateeError(
				"ACME_ERROR",
				`renewalInfo ${url} answered HTTP ${res.status}${problem ? `: ${describeProblem(problem)}` : ""}`,
				{
					context: {
						endpoint: url,
						operation,
						status: res.status,
						...(problem ? { problem: problem.type } : {}),
					},
					retryable: true,
				},
			);
		}
		return parseRenewalInfo(url, res.data);
	} catch (e) {
		throw toAcmeError(e, { operation, endpoint: directoryUrl, problems: ctx.problems, signal });
	}
}
