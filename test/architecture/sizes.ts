/** The sizes of src/'s files and functions, measured with the TypeScript compiler, for the architecture tests. */
import { join, relative } from "node:path";
import { type Node, type SourceFile, SyntaxKind } from "typescript/unstable/ast";
import { API } from "typescript/unstable/sync";

const ROOT = join(import.meta.dirname, "../..");

/** One named function: where it is, what it is called, and its own lines (nested named functions left out). */
export interface FunctionSize {
	file: string;
	name: string;
	lines: number;
}

/** Kinds that are a function of their own wherever they stand. */
const DECLARED = new Set([
	SyntaxKind.FunctionDeclaration,
	SyntaxKind.MethodDeclaration,
	SyntaxKind.Constructor,
	SyntaxKind.GetAccessor,
	SyntaxKind.SetAccessor,
]);
/** Kinds that are a function of their own when a name holds them (`const f = () => …`, `{ f: () => … }`). */
const EXPRESSED = new Set([SyntaxKind.ArrowFunction, SyntaxKind.FunctionExpression]);
const HOLDERS = new Set([
	SyntaxKind.VariableDeclaration,
	SyntaxKind.PropertyDeclaration,
	SyntaxKind.PropertyAssignment,
]);

function isNamedFunction(node: Node): boolean {
	return DECLARED.has(node.kind) || (EXPRESSED.has(node.kind) && HOLDERS.has(node.parent.kind));
}

/** The node's name as written (`Class.method` for a class member), or "default"/"constructor". */
function nameOf(node: Node, file: SourceFile): string {
	const target = EXPRESSED.has(node.kind) ? node.parent : node;
	const named = target as Node & { name?: Node };
	const own =
		node.kind === SyntaxKind.Constructor ? "constructor" : named.name ? named.name.getText(file) : "default";
	const owner = target.parent as Node & { name?: Node };
	const inClass = owner.kind === SyntaxKind.ClassDeclaration || owner.kind === SyntaxKind.ClassExpression;
	return inClass && owner.name ? `${owner.name.getText(file)}.${own}` : own;
}

/** Lines from the node's first token (its doc comment left out) to its last. */
function spanOf(node: Node, file: SourceFile): [number, number] {
	return [
		file.getLineAndCharacterOfPosition(node.getStart(file)).line,
		file.getLineAndCharacterOfPosition(node.getEnd()).line,
	];
}

/** Every named function of one file, each with its own lines; names repeated in a file get `#2`, `#3`. */
function functionsOf(file: SourceFile, path: string): FunctionSize[] {
	const found: FunctionSize[] = [];
	const seen = new Map<string, number>();
	/** Visits `node`'s subtree; returns the lines the named functions directly inside it take. */
	const visit = (node: Node): number => {
		let nested = 0;
		node.forEachChild((child) => {
			if (!isNamedFunction(child)) {
				nested += visit(child);
				return undefined;
			}
			const [first, last] = spanOf(child, file);
			const span = last - first + 1;
			const name = nameOf(child, file);
			const count = (seen.get(name) ?? 0) + 1;
			seen.set(name, count);
			const entry = { file: path, name: count === 1 ? name : `${name}#${count}`, lines: 0 };
			found.push(entry);
			entry.lines = span - visit(child);
			nested += span;
			return undefined;
		});
		return nested;
	};
	visit(file);
	return found;
}

/** Every .ts file under `under` (src/ by default) with its line count, and every named function in them with its own lines. */
export function measureSources(
	tsconfig = join(ROOT, "tsconfig.json"),
	under = "src/",
): { files: Map<string, number>; functions: FunctionSize[] } {
	const api = new API({ cwd: ROOT });
	try {
		const project = api.updateSnapshot({ openProject: tsconfig }).getProjects()[0];
		if (!project) throw new Error(`${tsconfig} opened no project`);
		const files = new Map<string, number>();
		const functions: FunctionSize[] = [];
		for (const name of project.program.getSourceFileNames()) {
			const path = relative(ROOT, name);
			if (!path.startsWith(under)) continue;
			const file = project.program.getSourceFile(name);
			if (!file) throw new Error(`${path}: the compiler has no source file for it`);
			files.set(path, file.text.split("\n").length - (file.text.endsWith("\n") ? 1 : 0));
			functions.push(...functionsOf(file, path));
		}
		return { files, functions };
	} finally {
		api.close();
	}
}

/** What is wrong with `measured` against `limit` and the allowlist `allowed`: new offenders, growth, stale entries. */
export function sizeProblems(
	measured: ReadonlyMap<string, number>,
	allowed: Readonly<Record<string, number>>,
	limit: number,
): string[] {
	const problems: string[] = [];
	for (const [name, size] of measured) {
		const ceiling = allowed[name];
		if (ceiling === undefined && size > limit)
			problems.push(`${name}: ${size} lines, over the limit of ${limit}: split it by responsibility`);
		else if (ceiling !== undefined && size > ceiling)
			problems.push(
				`${name}: ${size} lines, grown past its allowance of ${ceiling}: split it, do not grow it`,
			);
	}
	for (const [name, ceiling] of Object.entries(allowed)) {
		const size = measured.get(name);
		if (size === undefined) problems.push(`${name}: allowed ${ceiling} lines but gone: take it off the list`);
		else if (size <= limit)
			problems.push(`${name}: ${size} lines, within ${limit} now: take it off the list`);
	}
	return problems;
}
