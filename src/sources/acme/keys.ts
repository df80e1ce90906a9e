/** Private keys for issued certificates: a new one per issuance, PKCS#8 PEM. */
import { generateKeyPair } from "node:crypto";
import type { KeyType } from "../types.js";

function generate(
	options: { type: "ec"; namedCurve: string } | { type: "rsa"; modulusLength: number },
): Promise<string> {
	const encoding = {
		privateKeyEncoding: { type: "pkcs8", format: "pem" },
		publicKeyEncoding: { type: "spki", format: "pem" },
	} as const;
	return new Promise((resolve, reject) => {
		const done = (err: Error | null, _pub: string, priv: string) => (err ? reject(err) : resolve(priv));
		if (options.type === "ec") generateKeyPair("ec", { namedCurve: options.namedCurve, ...encoding }, done);
		else generateKeyPair("rsa", { modulusLength: options.modulusLength, ...encoding }, done);
	});
}

export function createCertificateKey(keyType: KeyType): Promise<string> {
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
