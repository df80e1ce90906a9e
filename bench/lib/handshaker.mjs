// Child process: TLS handshakes back to back against 127.0.0.1:<port>, rotating SNI names, until a line
// "stop" arrives on stdin. Results stream on stdout as NDJSON, one object per line, so no single line grows
// with the run: {"ready":true} once, then {"latenciesMs":[...]} batches (at most every 100 ms or 1000
// handshakes), then {"done":true,"handshakes":n,"failures":n,"errors":{...}} as the last line before exit.
// argv: port namesFile concurrency. Plain JS so it starts fast and runs apart from the process under test.
import { readFileSync } from "node:fs";
import { connect } from "node:tls";

const [port, namesFile, concurrencyArg] = process.argv.slice(2);
const names = readFileSync(namesFile, "utf8").split("\n").filter(Boolean);
let batch = [];
const errors = {};
let failures = 0;
let handshakes = 0;
let next = 0;
let stopping = false;

const line = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
function flush() {
	if (batch.length === 0) return;
	line({ latenciesMs: batch });
	batch = [];
}
const flusher = setInterval(flush, 100);

function handshake(servername) {
	return new Promise((resolve) => {
		const started = performance.now();
		let settled = false;
		const done = (error) => {
			if (settled) return;
			settled = true;
			clearTimeout(timer);
			socket.destroy();
			handshakes += 1;
			if (error) {
				failures += 1;
				const key = String(error.code ?? error.message).slice(0, 80);
				errors[key] = (errors[key] ?? 0) + 1;
			} else {
				batch.push(Math.round((performance.now() - started) * 1000) / 1000);
				if (batch.length >= 1000) flush();
			}
			resolve();
		};
		const socket = connect({ host: "127.0.0.1", port: Number(port), servername, rejectUnauthorized: false });
		const timer = setTimeout(() => done(new Error("timeout 5s")), 5000);
		socket.once("secureConnect", () => done());
		socket.once("error", (e) => done(e));
		socket.once("close", () => done(new Error("closed before handshake")));
	});
}

async function loop() {
	while (!stopping) await handshake(names[next++ % names.length]);
}

process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => {
	if (d.includes("stop")) stopping = true;
});
line({ ready: true });
await Promise.all(Array.from({ length: Number(concurrencyArg ?? 1) }, loop));
clearInterval(flusher);
flush();
line({ done: true, handshakes, failures, errors });
// Exit once stdout is drained: process.exit() right after a large write could cut the pipe short.
process.stdout.end(() => process.exit(0));
