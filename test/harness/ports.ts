/** Free loopback ports, for test processes that cannot listen on port 0 themselves. */
import dgram from "node:dgram";
import net from "node:net";

/**
 * Ports are drawn below Linux's ephemeral range (32768-60999): a port the OS handed out with bind(0) can be
 * taken again, before our process binds it, as the local end of any outgoing loopback connection, and the
 * suite makes many. Below the range only another listener can take it.
 *
 * A port handed out is often left unbound for a while: Pebble's HTTP-01 port is bound by the responder only
 * during an order, a killed CA's port must stay refused. So each vitest worker draws from its own slice of
 * the range (VITEST_POOL_ID, 1..maxWorkers): a test file in the other worker never takes one of them. The
 * files of one worker run one after another, and within this module no port is handed out twice.
 */
const RANGE_LOW = 20_000;
const RANGE_HIGH = 32_767;
const SLICES = 4;
const slice = (() => {
	const id = Number(process.env.VITEST_POOL_ID);
	if (!Number.isInteger(id) || id < 1) return { low: RANGE_LOW, high: RANGE_HIGH };
	const size = Math.floor((RANGE_HIGH - RANGE_LOW + 1) / SLICES);
	const low = RANGE_LOW + ((id - 1) % SLICES) * size;
	return { low, high: low + size - 1 };
})();
const handedOut = new Set<number>();

function tryTcp(port: number): Promise<net.Server | undefined> {
	return new Promise((resolve) => {
		const server = net.createServer();
		server.once("error", () => resolve(undefined));
		server.listen(port, "127.0.0.1", () => resolve(server));
	});
}

function udpFree(port: number): Promise<boolean> {
	return new Promise((resolve) => {
		const socket = dgram.createSocket("udp4");
		socket.once("error", () => resolve(false));
		socket.bind(port, "127.0.0.1", () => socket.close(() => resolve(true)));
	});
}

/**
 * `count` distinct free ports on 127.0.0.1. All are held open together before being released, so they
 * differ; with `udp`, each is also free for UDP (a DNS server binds both).
 */
export async function freePorts(count: number, options: { udp?: boolean } = {}): Promise<number[]> {
	const held: net.Server[] = [];
	const ports: number[] = [];
	try {
		for (let tries = 0; ports.length < count; tries++) {
			if (tries > 1000) throw new Error(`no free loopback ports in ${slice.low}-${slice.high}`);
			const port = slice.low + Math.floor(Math.random() * (slice.high - slice.low + 1));
			if (ports.includes(port) || handedOut.has(port)) continue;
			const server = await tryTcp(port);
			if (!server) continue;
			held.push(server);
			if (options.udp && !(await udpFree(port))) continue;
			ports.push(port);
		}
	} finally {
		await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
	}
	for (const port of ports) handedOut.add(port);
	return ports;
}
