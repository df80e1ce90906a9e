/**
 * `certificatee health [--ready]`: asks the running daemon's `/healthz` (or `/readyz`) on the `listen` address of
 * the configuration, as the daemon itself reads it (the file's `listen`, else $CERTIFICATEE_LISTEN, else the
 * default). For container health checks and scripts: exit 0 when it answers 200, 1 otherwise.
 */
import { parseHostPort } from "../../base/address.js";
import { CertificateeError, describeError } from "../../errors.js";
import type { CommandContext } from "../context.js";
import { EXIT, ExitError } from "../exit.js";

/** An address the daemon binds on every interface is asked on loopback. */
function reachable(listen: string): string {
	const { host, port } = parseHostPort(listen, "listen");
	const to = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host;
	return to.includes(":") ? `[${to}]:${port}` : `${to}:${port}`;
}

export async function healthCommand(ctx: CommandContext, options: { ready?: boolean }): Promise<void> {
	const { config } = ctx.loadConfig();
	const url = `http://${reachable(config.listen)}/${options.ready ? "readyz" : "healthz"}`;
	let response: Response;
	try {
		response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
	} catch (e) {
		throw new CertificateeError("NOT_AVAILABLE", `no answer from ${url}: ${describeError(e)}`, {
			context: { field: "listen" },
			hint: "is certificatee run running with this configuration? listen comes from the file, else $CERTIFICATEE_LISTEN",
		});
	}
	const body = (await response.text()).trim();
	ctx.out(`${url}: ${response.status} ${body}`);
	if (response.status !== 200) throw new ExitError(EXIT.error);
}
