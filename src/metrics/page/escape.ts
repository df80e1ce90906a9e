/**
 * HTML built only through `html`: every interpolated value is escaped unless it is already Html, so a name or
 * an error text from a configuration file or an endpoint can never become markup.
 */

/** Markup known to be safe: produced by `html` (or `raw` for constant markup written in this folder). */
export interface Html {
	readonly markup: string;
}

export type Part = Html | string | number | false | null | undefined | readonly Part[];

const ENTITIES: Record<string, string> = {
	"&": "&amp;",
	"<": "&lt;",
	">": "&gt;",
	'"': "&quot;",
	"'": "&#39;",
};

/** Text and attribute values alike (quotes are escaped too). */
export function escapeHtml(text: string): string {
	return text.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
}

/** Constant markup from this folder; never pass data. */
export function raw(markup: string): Html {
	return { markup };
}

function isHtml(part: Part): part is Html {
	return typeof part === "object" && part !== null && "markup" in part;
}

function render(part: Part): string {
	if (part === false || part === null || part === undefined) return "";
	if (isHtml(part)) return part.markup;
	if (Array.isArray(part)) return part.map(render).join("");
	return escapeHtml(String(part));
}

/** A template whose values are escaped (arrays are joined; false, null and undefined render nothing). */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
	let markup = strings[0] ?? "";
	values.forEach((v, i) => {
		markup += render(v) + (strings[i + 1] ?? "");
	});
	return { markup };
}
