/** Exit codes, documented in the README. Only src/cli/main.ts calls process.exit. */
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
