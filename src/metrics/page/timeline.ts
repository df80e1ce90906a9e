/**
 * A certificate's life as an inline SVG: the bar runs from notBefore to notAfter, the elapsed part is filled,
 * a line marks now and a diamond the renewal point. The geometry is a pure function, tested apart.
 */
import { type Html, html } from "./escape.js";

export interface TimelineInput {
	notBefore: Date;
	notAfter: Date;
	now: Date;
	/** When certificatee renews it; absent for certificates from a directory source. */
	renewAt?: Date;
}

export type TimelinePhase = "not-yet-valid" | "valid" | "renewal-due" | "expired";

export interface TimelineGeometry {
	width: number;
	height: number;
	/** The whole validity, notBefore at bar.x. */
	bar: { x: number; y: number; width: number; height: number };
	/** Width of the elapsed part, from bar.x. */
	elapsed: number;
	/** Where now is drawn (clamped to the bar's ends when outside the validity). */
	nowX: number;
	/** Where the renewal point is drawn, when there is one (clamped likewise). */
	renewX?: number;
	phase: TimelinePhase;
}

const WIDTH = 240;
const HEIGHT = 24;
/** Room at both ends so a marker on an end stays visible. */
const PAD = 5;

const round = (x: number) => Math.round(x * 10) / 10;

export function timelineGeometry(t: TimelineInput): TimelineGeometry {
	const start = t.notBefore.getTime();
	const span = Math.max(1, t.notAfter.getTime() - start);
	const barWidth = WIDTH - 2 * PAD;
	const at = (time: number) => round(PAD + barWidth * Math.min(1, Math.max(0, (time - start) / span)));
	const now = t.now.getTime();
	const phase: TimelinePhase =
		now < start
			? "not-yet-valid"
			: now >= t.notAfter.getTime()
				? "expired"
				: t.renewAt !== undefined && now >= t.renewAt.getTime()
					? "renewal-due"
					: "valid";
	const nowX = at(now);
	return {
		width: WIDTH,
		height: HEIGHT,
		bar: { x: PAD, y: 8, width: barWidth, height: 8 },
		elapsed: round(nowX - PAD),
		nowX,
		...(t.renewAt !== undefined ? { renewX: at(t.renewAt.getTime()) } : {}),
		phase,
	};
}

const DAY = 86_400_000;

/** "41 d", "5 h", "12 min": coarse, for labels. */
export function roughDuration(ms: number): string {
	const abs = Math.abs(ms);
	if (abs >= 2 * DAY) return `${Math.floor(abs / DAY)} d`;
	if (abs >= 2 * 3_600_000) return `${Math.floor(abs / 3_600_000)} h`;
	if (abs >= 2 * 60_000) return `${Math.floor(abs / 60_000)} min`;
	return `${Math.floor(abs / 1000)} s`;
}

/** The label read by screen readers and shown as the tooltip. */
export function timelineLabel(t: TimelineInput): string {
	const left = t.notAfter.getTime() - t.now.getTime();
	const parts = [
		`valid ${t.notBefore.toISOString()} to ${t.notAfter.toISOString()}`,
		left > 0 ? `expires in ${roughDuration(left)}` : `expired ${roughDuration(left)} ago`,
	];
	if (t.renewAt !== undefined) parts.push(`renewal ${t.renewAt.toISOString()}`);
	return parts.join("; ");
}

export function timelineSvg(t: TimelineInput): Html {
	const g = timelineGeometry(t);
	const label = timelineLabel(t);
	const { bar } = g;
	const renew =
		g.renewX === undefined
			? ""
			: html`<path class="renew" d="M${g.renewX} ${bar.y - 6} l4 4 l-4 4 l-4 -4 z"/>`;
	return html`<svg class="timeline ${g.phase}" data-phase="${g.phase}" width="${g.width}" height="${g.height}" viewBox="0 0 ${g.width} ${g.height}" role="img" aria-label="${label}"><title>${label}</title><rect class="life" x="${bar.x}" y="${bar.y}" width="${bar.width}" height="${bar.height}" rx="2"/><rect class="elapsed" x="${bar.x}" y="${bar.y}" width="${g.elapsed}" height="${bar.height}" rx="2"/>${renew}<line class="now" x1="${g.nowX}" x2="${g.nowX}" y1="2" y2="${g.height - 2}"/></svg>`;
}
