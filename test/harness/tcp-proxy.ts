/**
 * A loopback TCP relay whose link can be cut and restored, for tests of what a client does when its connection to
 * a real server breaks while the server itself stays up (other clients keep writing to it).
 *
 *   const proxy = await startTcpProxy(etcd.endpoints[0]);   // "http://127.0.0.1:<port>" or "127.0.0.1:<port>"
 *   connectEtcd({ endpoints: [proxy.endpoint], ... });
 *   proxy.cut();       // drops every open connection and refuses new ones
 *   proxy.restore();   // accepts connections again
 *   await proxy.stop();
 */
import net from "node:net";

export interface TcpProxy {
	/** "http://127.0.0.1:<port>". */
	endpoint: string;
	/** Connections accepted so far (a reconnecting client makes a new one). */
	connections(): number;
	cut(): void;
	restore(): void;
	stop(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
	const url = new URL(target.includes("://") ? target : `tcp://${target}`);
	const port = Number(url.port);
	const sockets = new Set<net.Socket>();
	let open = true;
	let accepted = 0;
	const server = net.createServer((client) => {
		if (!open) {
			client.destroy();
			return;
		}
		accepted++;
		const upstream = net.connect(port, url.hostname);
		for (const s of [client, upstream]) {
			sockets.add(s);
			s.on("error", () => undefined);
			s.on("close", () => {
				sockets.delete(s);
				client.destroy();
				upstream.destroy();
			});
		}
		client.pipe(upstream);
		upstream.pipe(client);
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const address = server.address() as net.AddressInfo;
	return {
		endpoint: `http://127.0.0.1:${address.port}`,
		connections: () => accepted,
		cut() {
			open = false;
			for (const s of sockets) s.destroy();
		},
		restore() {
			open = true;
		},
		async stop() {
			open = false;
			for (const s of sockets) s.destroy();
			await new Promise<void>((resolve) => server.close(() => resolve()));
		},
	};
}
