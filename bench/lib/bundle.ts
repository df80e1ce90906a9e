/**
 * One TypeScript entry bundled (esbuild, dependencies included) into a plain ESM file, so a measured child
 * process runs as the shipped JavaScript does (`node dist/…`), without tsx's loader thread in its CPU and memory.
 */
import { join } from "node:path";
import { build } from "esbuild";

export async function bundleScript(entry: string, outDir: string, name: string): Promise<string> {
	const outfile = join(outDir, `${name}.mjs`);
	await build({
		entryPoints: [entry],
		bundle: true,
		platform: "node",
		format: "esm",
		target: "node22",
		outfile,
		logLevel: "warning",
		// CommonJS dependencies inside an ESM bundle still call require().
		banner: {
			js: 'import { createRequire as __benchRequire } from "node:module"; const require = __benchRequire(import.meta.url);',
		},
	});
	return outfile;
}
