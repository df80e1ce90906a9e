import { describe, expect, it } from "vitest";
import { downgradeRefusal, type LiveCertificate } from "../../src/reconcile/downgrade.js";

const day = (n: number) => new Date(Date.UTC(2027, 0, 1) + n * 86_400_000);
const next = { serial: "0A", notAfter: day(90) };

describe("reconcile/downgrade: never replace a live certificate that expires later", () => {
	it.each<[string, Array<LiveCertificate | undefined>, boolean]>([
		["nothing live", [], false],
		["a side absent", [undefined], false],
		["live expiry unknown", [{ serial: "0B" }], false],
		["live expires earlier (a renewal)", [{ serial: "0B", notAfter: day(30) }], false],
		["the same certificate (same expiry)", [{ serial: "0A", notAfter: day(90) }], false],
		[
			"another certificate, same expiry (a tie is no downgrade)",
			[{ serial: "0B", notAfter: day(90) }],
			false,
		],
		["live expires later", [{ serial: "0B", notAfter: day(91) }], true],
		[
			"one side older, the other newer",
			[
				{ serial: "0C", notAfter: day(10) },
				{ serial: "0B", notAfter: day(120) },
			],
			true,
		],
		[
			"live expires one millisecond later",
			[{ serial: "0B", notAfter: new Date(day(90).getTime() + 1) }],
			true,
		],
	])("%s: refused %s", (_, live, refused) => {
		expect(downgradeRefusal(live, next) !== undefined).toBe(refused);
	});

	it("names the newest live certificate and the one refused", () => {
		const why = downgradeRefusal(
			[
				{ serial: "0B", notAfter: day(100) },
				{ serial: "0C", notAfter: day(120) },
			],
			next,
		);
		expect(why).toContain(`serial 0C, expires ${day(120).toISOString()}`);
		expect(why).toContain(`serial 0A, expires ${day(90).toISOString()}`);
	});
});
