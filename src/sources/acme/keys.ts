/** Private keys for issued certificates: a new one per issuance, as KeyObjects (for the CSR) and PKCS#8 PEM. */
import { generateKeyPair, type KeyObject } from "node:crypto";
import type { KeyType } from "../types.js";

export interface CertificateKey {
	privateKey: KeyObject;
	publicKey: KeyObject;
	/** PKCS#8 PEM of privateKey: what is stored. */
	keyPem: string;
}

function generate(
	options: { type: "ec"; namedCurve: string } | { type: "rsa"; modulusLength: number },
): Promise<CertificateKey> {
	return new Promise((resolve, reject) => {
		const done = (err: Error | null, publicKey: KeyObject, privateKey: KeyObject) => {
			if (err) return reject(err);
			const keyPem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
			resolve({ privateKey, publicKey, keyPem });
		};
		if (options.type === "ec") generateKeyPair("ec", { namedCurve: options.namedCurve }, done);
		else generateKeyPair("rsa", { modulusLength: options.modulusLength }, done);
	});
}

export function createCertificateKey(keyType: KeyType): Promise<CertificateKey> {
	switch (keyType) {
		case "ecdsa-p256":
			return generate({ type: "ec", namedCurve: "P-256" });
		case "ecdsa-p384":
			return generate({ type: "ec", namedCurve: "P-384" });
		case "rsa-2048":
			return generate({ type: "rsa", modulusLength: 2048 });
		case "rsa-4096":
			return generate({ type: "rsa", modulusLength: 4096 });
	}
}
