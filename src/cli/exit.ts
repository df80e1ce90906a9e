/** Exit codes, documented in the README. Only src/cli/main.ts calls process.exit. */
import type { CycleOutcome } from "../reconcile/outcome.js";

export const EXIT = {
	ok: 0,
	error: 1,
	/** `plan`: changes are pending. */
	changesPending: 2,
} as const;

export class ExitError extends Error {
	constructor(
		readonly exitCode: number,
		message = "",
	) {
		super(message);
	}
}

/**
 * `plan` and `sync`: 1 when anything failed (a source, an order, an endpoint that could not be observed, a
 * write, a probe, a refused update); `plan` 2 when changes are pending; `sync` 1 when changes were left undone;
 * 0 only when converged.
 */
export function cycleExitCode(outcome: CycleOutcome, mode: "plan" | "sync"): number {
	if (outcome.failures.length > 0) return EXIT.error;
	if (outcome.pending > 0) return mode === "plan" ? EXIT.changesPending : EXIT.error;
	return outcome.converged ? EXIT.ok : EXIT.error;
}
