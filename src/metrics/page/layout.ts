/**
 * The fleet page: a whole HTML document rendered on the server from the status document (the same one
 * /status.json and `status --json` give), readable with JavaScript off. Pure: time is passed in.
 */
import { VERSION } from "../../version.js";
import type { StatusDocument } from "../status-view.js";
import { CONTENT_SECURITY_POLICY, SCRIPT, STYLE } from "./assets.js";
import { type Html, html, raw } from "./escape.js";
import {
	certificatesSection,
	duplicatesSection,
	overview,
	problemsSection,
	reloadsSection,
	targetsSection,
} from "./sections.js";

export interface PageOptions {
	now: Date;
	/** How often the page refreshes itself (script) or reloads (no script). */
	refreshSeconds: number;
}

function body(doc: StatusDocument | undefined, now: Date): Html {
	if (doc === undefined) {
		return html`<main data-cycle=""><section><h2>Waiting for the first cycle</h2><p class="muted">certificatee has started; this page fills in when its first cycle finishes.</p></section></main>`;
	}
	return html`<main data-cycle="${doc.startedAt}"><p class="muted small">Last cycle ${doc.mode} started ${doc.startedAt}, took ${doc.durationMs} ms · page rendered ${now.toISOString()}</p>${overview(doc)}${certificatesSection(doc, now)}${targetsSection(doc)}${duplicatesSection(doc)}${reloadsSection(doc)}${problemsSection(doc)}</main>`;
}

export function renderPage(doc: StatusDocument | undefined, options: PageOptions): string {
	const refresh = Math.max(1, Math.round(options.refreshSeconds));
	return `<!doctype html>${html`<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>certificatee fleet</title><noscript><meta http-equiv="refresh" content="${refresh}"></noscript><style>${raw(STYLE)}</style></head><body data-refresh="${refresh}"><header><h1>certificatee fleet</h1><nav><a href="status.json">status.json</a><a href="metrics">metrics</a><a href="healthz">healthz</a><a href="readyz">readyz</a></nav><span class="muted small">version ${VERSION}</span><span id="live">refreshes every ${refresh} s</span></header>${body(doc, options.now)}<script>${raw(SCRIPT)}</script></body></html>`.markup}\n`;
}

/** Headers for the page: no caching, no framing, no sniffing, and the policy that allows only our inline parts. */
export const PAGE_HEADERS = {
	"content-type": "text/html; charset=utf-8",
	"cache-control": "no-store",
	"content-security-policy": CONTENT_SECURITY_POLICY,
	"x-content-type-options": "nosniff",
	"referrer-policy": "no-referrer",
} as const;
