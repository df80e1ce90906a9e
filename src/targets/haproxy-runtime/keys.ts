/** Does a key file belong to a certificate file? Read for pairs only (a separate key file, a stray X.key). */
import { createPrivateKey, X509Certificate } from "node:crypto";

const CERT = /-----BEGIN CERTIFICATE-----\r?\n[\s\S]*?-----END CERTIFICATE-----/;
const KEY = /-----BEGIN ([A-Z ]*)PRIVATE KEY-----\r?\n[\s\S]*?-----END \1PRIVATE KEY-----/;

/**
 * True when the first private key in `keyPem` is the key of the first certificate in `certPem`; false when it
 * is not, or either holds none or cannot be read (a reload would not pair them either).
 */
export function keyMatchesPem(certPem: string, keyPem: string): boolean {
	const cert = CERT.exec(certPem)?.[0];
	const key = KEY.exec(keyPem)?.[0];
	if (cert === undefined || key === undefined) return false;
	try {
		return new X509Certificate(cert).checkPrivateKey(createPrivateKey(key));
	} catch {
		return false;
	}
}
