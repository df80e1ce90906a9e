import { CertificateeError } from "../errors.js";

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * The segments of a state key ("certificates/example-com"), each of [A-Za-z0-9._-] and not starting with a dot;
 * INTERNAL otherwise (keys are made by code, never typed by an operator). `reserved` refuses segments a backend
 * keeps for itself (the file store's ".json").
 */
export function stateKeySegments(key: string, reserved?: (segment: string) => boolean): string[] {
	const segments = key.split("/");
	if (!segments.every((s) => SEGMENT.test(s) && !reserved?.(s))) {
		throw new CertificateeError("INTERNAL", `invalid state key "${key}"`, {
			context: { operation: "state key" },
		});
	}
	return segments;
}
