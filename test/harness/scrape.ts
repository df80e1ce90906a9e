/** The Prometheus text format as tests read it: name{labels} -> value, comments and blank lines skipped. */
export function parseScrape(text: string): Map<string, number> {
	const samples = new Map<string, number>();
	for (const line of text.split("\n")) {
		if (line === "" || line.startsWith("#")) continue;
		const i = line.lastIndexOf(" ");
		samples.set(line.slice(0, i), Number(line.slice(i + 1)));
	}
	return samples;
}
