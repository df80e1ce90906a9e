/**
 * The demo's own HAProxy: master-worker, an admin socket, and one HTTPS frontend on loopback whose
 * certificates come from a crt directory that certificatee keeps. Started and stopped by `certificatee demo`.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { accessSync, constants, mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

export interface DemoHaproxy {
	port: number;
	adminSocket: string;
	crtDir: string;
	stop(): Promise<void>;
}

export function findHaproxy(): string | undefined {
	for (const dir of [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/local/sbin"]) {
		const bin = join(dir, "haproxy");
		try {
			accessSync(bin, constants.X_OK);
			return bin;
		} catch {}
	}
	return undefined;
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
	return new Promise((resolve, reject) => {
		const s = createServer();
		s.once("error", reject);
		s.listen(0, host, () => {
			const addr = s.address();
			s.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
		});
	});
}

/** Starts HAProxy with `defaultPem` as the bind's default certificate and an (initially empty) crt dir. */
export async function startDemoHaproxy(bin: string, dir: string, defaultPem: string): Promise<DemoHaproxy> {
	const crtDir = join(dir, "certs");
	mkdirSync(crtDir, { recursive: true, mode: 0o700 });
	const defaultFile = join(dir, "default.pem");
	writeFileSync(defaultFile, defaultPem, { mode: 0o600 });
	const port = await freePort();
	const adminSocket = join(dir, "admin.sock");
	const config = `global
    log stderr format raw local0 notice
    stats socket ${adminSocket} mode 600 level admin expose-fd listeners
    stats timeout 30s
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend demo
    bind 127.0.0.1:${port} ssl crt ${defaultFile} crt ${crtDir}
    http-request return status 200 content-type text/plain lf-string "served by HAProxy for %[ssl_fc_sni], certificate serial %[ssl_f_serial,hex]\\n"
`;
	const cfg = join(dir, "haproxy.cfg");
	writeFileSync(cfg, config);
	try {
		execFileSync(bin, ["-c", "-q", "-f", cfg], { stdio: ["ignore", "ignore", "pipe"] });
	} catch (e) {
		const stderr = String((e as { stderr?: Buffer }).stderr ?? "");
		throw new Error(
			`HAProxy refused the demo configuration ${cfg}: ${stderr.trim().split("\n").slice(-3).join(" | ")}`,
		);
	}
	const child: ChildProcess = spawn(bin, ["-W", "-db", "-f", cfg], { stdio: ["ignore", "ignore", "pipe"] });
	let stderr = "";
	child.stderr?.on("data", (d: Buffer) => {
		stderr += d.toString();
	});
	const deadline = Date.now() + 10_000;
	while (!(await socketAnswers(adminSocket))) {
		if (child.exitCode !== null || Date.now() > deadline) {
			child.kill("SIGKILL");
			throw new Error(`HAProxy did not start: ${stderr.trim().split("\n").slice(-3).join(" | ")}`);
		}
		await new Promise((r) => setTimeout(r, 50));
	}
	return {
		port,
		adminSocket,
		crtDir,
		stop: () =>
			new Promise<void>((resolve) => {
				if (child.exitCode !== null) return resolve();
				child.once("exit", () => resolve());
				child.kill("SIGTERM");
				setTimeout(() => child.kill("SIGKILL"), 5_000).unref();
			}),
	};
}

async function socketAnswers(path: string): Promise<boolean> {
	const { connect } = await import("node:net");
	return new Promise((resolve) => {
		const s = connect(path);
		s.once("connect", () => {
			s.end();
			resolve(true);
		});
		s.once("error", () => resolve(false));
	});
}
