/** Runs `jobs` GETs with a few workers; after the first error (the endpoint's failure) no further GET is sent. */
export async function runJobs(
	jobs: number,
	concurrency: number,
	run: (k: number) => Promise<void>,
): Promise<void> {
	let next = 0;
	let failed = false;
	const worker = async () => {
		while (!failed && next < jobs) {
			try {
				await run(next++);
			} catch (e) {
				failed = true;
				throw e;
			}
		}
	};
	await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, jobs)) }, worker));
}
