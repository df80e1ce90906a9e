import { CertificateeError } from "../../src/errors.js";

/** The CertificateeError a promise rejects with; fails the test if it resolves or rejects with anything else. */
export async function failure(p: Promise<unknown>): Promise<CertificateeError> {
	try {
		await p;
	} catch (e) {
		if (e instanceof CertificateeError) return e;
		throw e;
	}
	throw new Error("expected a CertificateeError");
}
