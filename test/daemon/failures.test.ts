/** trackFailures, directly: which failures are logged over a sequence of cycles (time passed in). */
import { describe, expect, it } from "vitest";
import { type FailureMemory, failureLogLine, trackFailures } from "../../src/daemon/failures.js";
import type { Failure } from "../../src/reconcile/failures.js";

const MIN = 60_000;
const down = (message = "cannot connect to /run/haproxy/admin.sock"): Failure => ({
	kind: "endpoint",
	key: "endpoint:lb1/lb1",
	subject: "lb1/lb1",
	target: "lb1",
	endpoint: "lb1",
	code: "ENDPOINT_UNAVAILABLE",
	message,
	hint: "check that HAProxy runs",
});
const bad: Failure = {
	kind: "source",
	key: "source:/certs/x.pem:BUNDLE_NOT_PEM",
	subject: "/certs/x.pem",
	code: "BUNDLE_NOT_PEM",
	message: "no PEM block found",
};

/** Runs cycles (minute, failures) and returns the events of each, as "event kind". */
function run(cycles: Array<[number, Failure[]]>): string[][] {
	let memory: FailureMemory = new Map();
	return cycles.map(([minute, failures]) => {
		const r = trackFailures(memory, failures, minute * MIN);
		memory = r.memory;
		return r.events.map((e) => `${e.event} ${e.failure.kind}`);
	});
}

describe("trackFailures: log on change, remind hourly, never every cycle", () => {
	it.each([
		{
			name: "five failing cycles: one line each, on the first",
			cycles: [0, 1, 2, 3, 4].map((m): [number, Failure[]] => [m, [down(), bad]]),
			events: [["started endpoint", "started source"], [], [], [], []],
		},
		{
			name: "a message that only varies (backoff) is not a change; a new code is",
			cycles: [
				[0, [down()]],
				[1, [down("lb1: skipped after 2 failed cycles in a row")]],
				[2, [{ ...down(), code: "ENDPOINT_AUTH" }]],
			] as Array<[number, Failure[]]>,
			events: [["started endpoint"], [], ["changed endpoint"]],
		},
		{
			name: "a reminder at most every hour while it persists",
			cycles: [0, 30, 59, 60, 90, 120].map((m): [number, Failure[]] => [m, [down()]]),
			events: [["started endpoint"], [], [], ["reminder endpoint"], [], ["reminder endpoint"]],
		},
		{
			name: "resolved once; failing again is a new start",
			cycles: [
				[0, [down()]],
				[1, []],
				[2, []],
				[3, [down()]],
			] as Array<[number, Failure[]]>,
			events: [["started endpoint"], ["resolved endpoint"], [], ["started endpoint"]],
		},
	])("$name", ({ cycles, events }) => {
		expect(run(cycles)).toEqual(events);
	});

	it("a reminder carries the message first seen and how long it has lasted", () => {
		const first = trackFailures(new Map(), [down()], 0);
		const later = trackFailures(first.memory, [down("lb1: skipped after 9 failed cycles")], 61 * MIN);
		const line = failureLogLine(later.events[0] as Parameters<typeof failureLogLine>[0]);
		expect(line).toMatchObject({
			level: "warn",
			message: "endpoint still failing: cannot connect to /run/haproxy/admin.sock",
			fields: { code: "ENDPOINT_UNAVAILABLE", hint: "check that HAProxy runs", sinceSeconds: 3660 },
		});
	});
});
