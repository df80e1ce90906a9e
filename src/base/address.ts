import { z } from "zod";
import { CertificateeError } from "../errors.js";

/** A probe's `host:port` in the configuration: a port is required (`127.0.0.1` alone would probe nothing). */
export const probeAddressSchema = z.string().refine((a) => {
	const m = /^(\[[0-9a-fA-F:]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(a);
	return m !== null && Number(m[2]) <= 65_535;
}, 'expected "host:port" with the port of the TLS bind, e.g. "127.0.0.1:443"');

/** Where a node serves plain HTTP (`http_address`), for the HTTP-01 check GET before the CA is asked. */
export const httpAddressSchema = z.string().refine((a) => {
	const m = /^(\[[0-9a-fA-F:]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(a);
	return m !== null && Number(m[2]) <= 65_535;
}, 'expected "host:port" where this HAProxy serves port 80, e.g. "10.0.0.11:80"');

/** "host:port" or "[v6]:port" → parts; `what` names the setting in the error ("probe address", "listen"). */
export function parseHostPort(address: string, what = "address"): { host: string; port: number } {
	const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(address);
	const port = Number(m?.[3]);
	if (!m || port > 65_535) {
		throw new CertificateeError("CONFIG_INVALID", `${what} "${address}" is not host:port`, {
			hint: "e.g. 127.0.0.1:443 or [::1]:443",
		});
	}
	return { host: m[1] ?? m[2] ?? "", port };
}

/** A unix socket path (`/run/haproxy/admin.sock`, `unix@path`) or `host:port` (`[::1]:9999`). */
export function parseAddress(address: string): { path: string } | { host: string; port: number } {
	if (address.startsWith("unix@")) return { path: address.slice(5) };
	const tcp = /^(?:\[([^\]]+)\]|([^:/]+)):(\d+)$/.exec(address);
	if (tcp && !address.includes("/")) return { host: tcp[1] ?? tcp[2] ?? "", port: Number(tcp[3]) };
	return { path: address };
}

/** Whether an address (parseAddress) is a Unix socket: then HAProxy runs on this host. */
export function isUnixSocket(address: string): boolean {
	return "path" in parseAddress(address);
}
