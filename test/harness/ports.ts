/** Free loopback ports from the OS, for test processes that cannot listen on port 0 themselves. */
import dgram from "node:dgram";
import net from "node:net";

function tcpPort(): Promise<net.Server> {
	return new Promise((resolve, reject) => {
		const server = net.createServer();
		server.once("error", reject);
		server.listen(0, "127.0.0.1", () => resolve(server));
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
		while (ports.length < count) {
			const server = await tcpPort();
			held.push(server);
			const port = (server.address() as net.AddressInfo).port;
			if (options.udp && !(await udpFree(port))) continue;
			ports.push(port);
		}
	} finally {
		await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
	}
	return ports;
}
