// Child process: TLS handshakes back to back against 127.0.0.1:<port>, rotating SNI names, until a line
// "stop" arrives on stdin; then prints {handshakes, failures, errors, latenciesMs} as JSON and exits.
// argv: port namesFile concurrency. Plain JS so it starts fast and runs apart from the process under test.
import { readFileSync } from "node:fs";
import { connect } from "node:tls";

const [port, namesFile, concurrencyArg] = process.argv.slice(2);
const names = readFileSync(namesFile, "utf8").split("\n").filter(Boolean);
const latencies = [];
const errors = {};
let failures = 0;
let next = 0;
let stopping = false;

function handshake(servername) {
	return new Promise((resolve) => {
		const started = performance.now();
		let settled = false;
		const done = (error) => {
			if (settled) return;
			settled = true;
			clearTimeout(timer);
			socket.destroy();
			if (error) {
				failures += 1;
				const key = String(error.code ?? error.message).slice(0, 80);
				errors[key] = (errors[key] ?? 0) + 1;
			} else latencies.push(performance.now() - started);
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
process.stdout.write("ready\n");
await Promise.all(Array.from({ length: Number(concurrencyArg ?? 1) }, loop));
process.stdout.write(
	`${JSON.stringify({ handshakes: latencies.length + failures, failures, errors, latenciesMs: latencies })}\n`,
);
process.exit(0);
