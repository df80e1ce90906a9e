/**
 * A one-line progress bar on stderr for commands that observe large fleets. Shown only when stderr is a
 * TTY and the fleet is large; never in JSON mode (the caller decides), never when piped.
 */
export interface Progress {
	tick(): void;
	/** Erases the bar (the result follows on stdout). */
	done(): void;
}

export const PROGRESS_MIN_ENDPOINTS = 20;

const NONE: Progress = { tick() {}, done() {} };

export function createProgress(
	total: number,
	label: string,
	stream: NodeJS.WriteStream = process.stderr,
): Progress {
	if (stream.isTTY !== true || total <= PROGRESS_MIN_ENDPOINTS) return NONE;
	let count = 0;
	let shown = true;
	const width = 30;
	const draw = () => {
		const filled = Math.round((count / total) * width);
		stream.write(`\r${label} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${count}/${total}`);
	};
	draw();
	return {
		tick() {
			if (!shown) return;
			count = Math.min(total, count + 1);
			draw();
		},
		done() {
			if (shown) stream.write("\r\u001b[2K");
			shown = false;
		},
	};
}
