/**
 * The page's only style sheet and script, inline and constant, so the Content-Security-Policy can allow
 * exactly these two by hash and nothing else (no framework, no other origin, no inline handlers).
 */
import { createHash } from "node:crypto";

export const STYLE = `
:root { --fg:#1d2330; --muted:#697386; --line:#dde2ea; --bg:#f7f8fa; --card:#fff; --good:#1a7f37; --bad:#c62828;
  --warn:#a15c00; --bar:#cfe3d6; --elapsed:#6fbf8a; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); }
body { margin: 0; background: var(--bg); }
header { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; padding: .8rem 1.5rem; background: var(--card);
  border-bottom: 1px solid var(--line); }
header h1 { font-size: 1.2rem; margin: 0; }
header nav a { margin-right: .8rem; color: var(--muted); }
main { padding: 1rem 1.5rem 2rem; max-width: 1300px; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
h3 { font-size: .95rem; margin: .8rem 0 .3rem; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .2rem 1rem .8rem; margin-bottom: 1rem; }
.overview { display: flex; gap: 2rem; flex-wrap: wrap; padding: .8rem 1rem; }
.stat .value { display: block; font-size: 1.5rem; font-weight: 600; }
.stat .label, .muted { color: var(--muted); }
.small { font-size: .85em; }
.good, .stat.good .value { color: var(--good); }
.bad, .stat.bad .value, .error { color: var(--bad); }
.hint { color: var(--warn); font-size: .9em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .35rem .6rem; border-top: 1px solid var(--line); }
thead th { border-top: 0; color: var(--muted); font-weight: 500; }
table.endpoints { table-layout: fixed; }
table.endpoints th { width: 24%; overflow-wrap: anywhere; }
table.endpoints td.state { width: 7rem; }
td.conv.none { color: var(--muted); font-weight: 400; }
td.conv, th.conv { text-align: center; font-variant-numeric: tabular-nums; font-weight: 600; }
.state.converged, .state.issued, .state.source { color: var(--good); }
.state.pending, .state.due, .state.ordering { color: var(--warn); }
.state.failed, .state.unobserved, .state.failing, .state.backing-off, .state.capped { color: var(--bad); }
svg.timeline { display: block; }
svg.timeline .life { fill: var(--bar); }
svg.timeline .elapsed { fill: var(--elapsed); }
svg.timeline.renewal-due .elapsed { fill: #e0a23a; }
svg.timeline.expired .life, svg.timeline.expired .elapsed, svg.timeline.not-yet-valid .life { fill: #e57373; }
svg.timeline .now { stroke: var(--fg); stroke-width: 2; }
svg.timeline .renew { fill: #3a6fd8; }
.legend { font-weight: 400; margin-left: .5rem; }
.key { display: inline-block; width: 10px; height: 10px; margin: 0 .2rem 0 .5rem; vertical-align: -1px; }
.key.now { width: 2px; background: var(--fg); }
.key.renew { background: #3a6fd8; transform: rotate(45deg) scale(.8); }
#live { color: var(--muted); font-size: .85em; }
#live.stale { color: var(--bad); }
`;

/**
 * Progressive refresh: every `data-refresh` seconds, ask /status.json whether a newer cycle finished; if so,
 * fetch the page and swap in its server-rendered <main> (one renderer, on the server). Without JavaScript a
 * <noscript> meta refresh reloads the page instead.
 */
export const SCRIPT = `
(() => {
  const live = document.getElementById("live");
  const every = Number(document.body.dataset.refresh) * 1000;
  const tick = async () => {
    const main = document.querySelector("main");
    try {
      const res = await fetch("status.json", { cache: "no-store" });
      if (res.status === 200) {
        const doc = await res.json();
        if (doc.startedAt !== main.dataset.cycle) {
          const page = await fetch(location.pathname, { cache: "no-store" });
          const next = new DOMParser().parseFromString(await page.text(), "text/html").querySelector("main");
          if (next) main.replaceWith(document.importNode(next, true));
        }
      }
      live.textContent = "live · checked " + new Date().toLocaleTimeString();
      live.className = "";
    } catch (e) {
      live.textContent = "cannot reach certificatee (" + e.message + "); retrying";
      live.className = "stale";
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
})();
`;

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`;

/** Only the inline style and script above; fetches to this origin; nothing else. */
export const CONTENT_SECURITY_POLICY = [
	"default-src 'none'",
	`style-src ${sha256(STYLE)}`,
	`script-src ${sha256(SCRIPT)}`,
	"connect-src 'self'",
	"img-src 'self'",
	"base-uri 'none'",
	"form-action 'none'",
	"frame-ancestors 'none'",
].join("; ");
