/** `certificatee validate`: the configuration and every source's certificates, all problems listed. */

import { configProblems } from "../../config/load.js";
import { isCertificateeError } from "../../errors.js";
import type { CommandContext } from "../context.js";
import { EXIT, ExitError } from "../exit.js";

export interface ValidationReport {
	file: string;
	ok: boolean;
	problems: Array<{ path: string; message: string }>;
}

export async function validateCommand(ctx: CommandContext): Promise<void> {
	let report: ValidationReport;
	const file = ctx.options.config ?? "(default)";
	try {
		const loaded = ctx.loadConfig();
		report = { file: loaded.file, ok: true, problems: [] };
	} catch (e) {
		if (!isCertificateeError(e)) throw e;
		const problems = configProblems(e);
		report = {
			file: e.context.file ?? file,
			ok: false,
			problems: problems.length > 0 ? problems : [{ path: "(file)", message: e.message }],
		};
	}
	if (ctx.options.json) ctx.out(JSON.stringify(report, null, 2));
	else if (report.ok) ctx.out(`${report.file}: valid`);
	else {
		ctx.out(`${report.file}: ${report.problems.length} problem${report.problems.length === 1 ? "" : "s"}`);
		for (const p of report.problems) ctx.out(`  ${p.path}: ${p.message}`);
	}
	if (!report.ok) throw new ExitError(EXIT.error);
}
