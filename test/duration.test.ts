import { describe, expect, it } from "vitest";
import { durationSchema, formatDuration, parseDuration } from "../src/duration.js";

describe("duration", () => {
	it.each([
		["90s", 90_000],
		["500ms", 500],
		["5m", 300_000],
		["1h30m", 5_400_000],
		["7d", 604_800_000],
		["1.5h", 5_400_000],
	])("parses %s", (text, ms) => {
		expect(parseDuration(text)).toBe(ms);
		expect(durationSchema.parse(text)).toBe(ms);
	});

	it.each(["", "7", "7 days", "d", "-5s", "5x"])("rejects %j", (text) => {
		expect(parseDuration(text)).toBeUndefined();
		expect(durationSchema.safeParse(text).success).toBe(false);
	});

	it("formats for reports", () => {
		expect(formatDuration(5_400_000)).toBe("1h30m");
		expect(formatDuration(90_061_000)).toBe("1d1h1m1s");
		expect(formatDuration(20)).toBe("20ms");
	});
});
