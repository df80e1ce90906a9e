/**
 * ACME Renewal Information (RFC 9773): when the CA's directory advertises `renewalInfo`, the CA suggests
 * when to renew each certificate. acme-client 5.4 has no ARI support, so this is done here.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { z } from "zod";
import { CertificateeError } from "../../errors.js";
import type { RenewalWindow } from "../types.js";

/** RFC 9773 §4.1: base64url(AKI keyIdentifier) "." base64url(DER INTEGER bytes of the serial). */
export function ariCertId(certPem: string): string {
	const cert = new x509.X509Certificate(certPem);
	const aki = cert.getExtension(x509.AuthorityKeyIdentifierExtension);
	if (!aki?.keyId) {
		throw new CertificateeError("ACME_ERROR", "certificate has no Authority Key Identifier; no ARI certID", {
			context: { operation: "ari" },
		});
	}
	let serial = Buffer.from(cert.serialNumber, "hex");
	while (serial.length > 1 && serial[0] === 0 && serial[1]! < 0x80) serial = serial.subarray(1);
	if (serial[0]! >= 0x80) serial = Buffer.concat([Buffer.from([0]), serial]);
	return `${Buffer.from(aki.keyId, "hex").toString("base64url")}.${serial.toString("base64url")}`;
}

export const renewalInfoSchema = z.object({
	suggestedWindow: z.object({
		start: z.iso.datetime({ offset: true }),
		end: z.iso.datetime({ offset: true }),
	}),
	explanationURL: z.string().optional(),
});

/** The window from a renewalInfo response body, or an error naming the endpoint. */
export function parseRenewalInfo(url: string, body: unknown): RenewalWindow {
	const parsed = renewalInfoSchema.safeParse(body);
	if (!parsed.success) {
		throw new CertificateeError(
			"ACME_ERROR",
			`renewalInfo from ${url} is malformed: ${z.prettifyError(parsed.error)}`,
			{
				context: { endpoint: url, operation: "ari" },
				retryable: true,
			},
		);
	}
	const start = new Date(parsed.data.suggestedWindow.start);
	const end = new Date(parsed.data.suggestedWindow.end);
	if (end.getTime() < start.getTime()) {
		throw new CertificateeError(
			"ACME_ERROR",
			`renewalInfo from ${url} has a window that ends before it starts`,
			{
				context: { endpoint: url, operation: "ari" },
				retryable: true,
			},
		);
	}
	return { start, end };
}
