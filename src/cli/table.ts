/** Aligned text tables; colour only when asked (a TTY). */
import pc from "picocolors";

export type Colour = "green" | "red" | "yellow" | "dim" | "bold" | "cyan";

export interface Cell {
	text: string;
	colour?: Colour;
}

export interface Styler {
	paint(cell: Cell | string): string;
}

/** Colour when asked (stdout is a TTY) unless NO_COLOR is set to a non-empty value (no-color.org). */
export function styler(colour: boolean, env: NodeJS.ProcessEnv = process.env): Styler {
	const c = pc.createColors(colour && !env.NO_COLOR);
	return {
		paint(cell) {
			if (typeof cell === "string") return cell;
			return cell.colour ? c[cell.colour](cell.text) : cell.text;
		},
	};
}

/** Pads by the visible text, then paints, so colours never break alignment. */
export function renderTable(header: string[], rows: Array<Array<Cell | string>>, style: Styler): string[] {
	const text = (c: Cell | string) => (typeof c === "string" ? c : c.text);
	const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => text(r[i] ?? "").length)));
	const line = (cells: Array<Cell | string>, paint: boolean) =>
		cells
			.map((c, i) => {
				const pad = " ".repeat(Math.max(0, (widths[i] ?? 0) - text(c).length));
				return (paint ? style.paint(c) : text(c)) + (i < cells.length - 1 ? pad : "");
			})
			.join("  ")
			.trimEnd();
	return [style.paint({ text: line(header, false), colour: "bold" }), ...rows.map((r) => line(r, true))];
}
