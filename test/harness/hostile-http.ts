/**
 * Hostile HTTP servers on loopback, in a child process (their memory is not the test's): `trickle` answers
 * 200 with JSON headers at once, then one byte every `trickleMs`, never ending; `flood` answers 200 and
 * streams `floodBytes` of JSON-looking bytes as fast as the client reads (no Content-Length). Both answer
 * every path and method alike, so any client (the Data Plane API's, ACME's) meets them on its first request.
 *
 *   const hostile = await startHostileHttp({ floodBytes: 400 * 1024 ** 2 });
 *   hostile.trickle   // "http://127.0.0.1:<port>"
 *   hostile.flood
 *   await hostile.close();
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface HostileHttp {
	trickle: string;
	flood: string;
	close(): Promise<void>;
}

const SERVER = `
const http = require("node:http");
const [trickleMs, floodBytes] = process.argv.slice(1).map(Number);
const trickle = http.createServer((req, res) => {
	req.resume();
	res.writeHead(200, { "content-type": "application/json" });
	res.write("[");
	const timer = setInterval(() => res.write(" "), trickleMs);
	res.on("close", () => clearInterval(timer));
});
const chunk = Buffer.alloc(1024 * 1024, " ");
const flood = http.createServer((req, res) => {
	req.resume();
	res.writeHead(200, { "content-type": "application/json" });
	let sent = 0;
	const pump = () => {
		while (sent < floodBytes) {
			sent += chunk.length;
			if (!res.write(chunk)) return res.once("drain", pump);
		}
		res.end("]");
	};
	res.write("[");
	pump();
	res.on("error", () => undefined);
});
for (const s of [trickle, flood]) s.keepAliveTimeout = 0;
trickle.listen(0, "127.0.0.1", () =>
	flood.listen(0, "127.0.0.1", () =>
		console.log(JSON.stringify({ trickle: trickle.address().port, flood: flood.address().port })),
	),
);
`;

export async function startHostileHttp(
	options: { trickleMs?: number; floodBytes?: number } = {},
): Promise<HostileHttp> {
	const child = spawn(
		process.execPath,
		["-e", SERVER, String(options.trickleMs ?? 300), String(options.floodBytes ?? 400 * 1024 ** 2)],
		{ stdio: ["ignore", "pipe", "inherit"] },
	);
	const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
	const line = await new Promise<string>((resolve, reject) => {
		const lines = createInterface({ input: child.stdout! });
		lines.once("line", resolve);
		child.once("exit", (code) => reject(new Error(`hostile HTTP server exited (${code}) before listening`)));
	});
	const ports = JSON.parse(line) as { trickle: number; flood: number };
	return {
		trickle: `http://127.0.0.1:${ports.trickle}`,
		flood: `http://127.0.0.1:${ports.flood}`,
		async close() {
			if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
			await exited;
		},
	};
}
