/**
 * The master CLI's answers, verbatim from each HAProxy line (captured from the matrix's builds, issue 23):
 * `reload` answers nothing on 2.6 and `Success=N`, `--`, the startup log on 2.8 and later; `show proc` lists
 * the worker that survived a failed reload under `# old workers` from 3.2 on.
 */
import { describe, expect, it } from "vitest";
import { parseShowProc, readReloadAnswer } from "../../../src/targets/haproxy-runtime/master.js";

const FAILED_26 = `#<PID>          <type>          <reloads>       <uptime>        <version>      
22192           master          2 [failed: 1]   0d00h00m03s     2.6.12-1+deb12u4
# workers
22198           worker          1               0d00h00m03s     2.6.12-1+deb12u4
# programs

`;

const FAILED_34 = `#<PID>          <type>          <reloads>       <uptime>        <version>      
22773           master          2 [failed: 1]   0d00h00m04s     3.4.0-64a335366
# workers
# old workers
22783           worker          1               0d00h00m04s     3.4.0-64a335366

`;

const RELOADED_28 = `Success=1
--
[NOTICE]   (22346) : New worker (22365) forked
[NOTICE]   (22346) : Loading success.
[NOTICE]   (22346) : haproxy version is 2.8.0-fdd8154ed
[NOTICE]   (22346) : path to executable is /work/shared/haproxy/2.8.0/haproxy
[WARNING]  (22346) : Former worker (22353) exited with code 0 (Exit)

`;

const REFUSED_34 = `Success=0
--
[NOTICE]   (22773) : Initializing new worker (22820)
[NOTICE]   (22820) : haproxy version is 3.4.0-64a335366
[NOTICE]   (22820) : path to executable is /work/shared/haproxy/3.4.0/haproxy
[ALERT]    (22820) : config : parsing [/tmp/h/haproxy.cfg:16] : 'bind 127.0.0.1:20307' in section 'frontend' : unable to stat SSL certificate from file '/nonexistent/broken.pem' : No such file or directory.
[ALERT]    (22820) : config : Error(s) found in configuration file : /tmp/h/haproxy.cfg
[ALERT]    (22820) : config : Fatal errors found in configuration.
[NOTICE]   (22773) : haproxy version is 3.4.0-64a335366
[NOTICE]   (22773) : path to executable is /work/shared/haproxy/3.4.0/haproxy
[WARNING]  (22773) : Failed to load worker (22820) exited with code 1 (Exit)

`;

describe("targets/haproxy-runtime/master: the master CLI's answers per HAProxy line", () => {
	it("reload on 2.6 answers nothing (show proc tells), on 2.8+ Success=1 or Success=0 with the ALERT lines", () => {
		expect(readReloadAnswer("")).toEqual({ status: "unknown" });
		expect(readReloadAnswer(RELOADED_28)).toEqual({ status: "loaded" });
		expect(readReloadAnswer(REFUSED_34)).toEqual({
			status: "failed",
			alerts: [
				"config : parsing [/tmp/h/haproxy.cfg:16] : 'bind 127.0.0.1:20307' in section 'frontend' : unable to stat SSL certificate from file '/nonexistent/broken.pem' : No such file or directory.",
				"config : Error(s) found in configuration file : /tmp/h/haproxy.cfg",
				"config : Fatal errors found in configuration.",
			],
		});
		// A WARNING is not a failure: Success=1 decides.
		expect(readReloadAnswer(RELOADED_28.replace("Success=1", "Success=0"))).toEqual({
			status: "failed",
			alerts: [],
		});
	});

	it("show proc after a failed reload: 2.6 keeps the worker under # workers, 3.2+ under # old workers", () => {
		expect(parseShowProc(FAILED_26)).toEqual({
			reloads: 2,
			failed: 1,
			workers: [{ pid: 22198, reloads: 1 }],
		});
		expect(parseShowProc(FAILED_34)).toEqual({
			reloads: 2,
			failed: 1,
			workers: [{ pid: 22783, reloads: 1 }],
		});
	});
});
