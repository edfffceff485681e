/**
 * The dashboard's stylesheet, inlined in the page (allowed by its CSP hash). Kept in a
 * TS module so it ships inside dist/ with no copy step.
 */
export const DASHBOARD_CSS = String.raw`
:root {
  --bg: #f4f5f7; --card: #fff; --fg: #1c2130; --muted: #6b7280; --line: #e5e7eb;
  --crit: #c92a2a; --crit-bg: #fde8e8; --warn: #b45309; --warn-bg: #fef3c7;
  --info: #1d4ed8; --info-bg: #e0e7ff; --ok: #15803d; --ok-bg: #dcfce7; --off: #9ca3af;
  --fresh: #fff7d6; --accent: #2563eb;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0f1117; --card: #171a22; --fg: #e5e7eb; --muted: #9ca3af; --line: #2a2f3a;
    --crit: #f87171; --crit-bg: #3b1616; --warn: #fbbf24; --warn-bg: #3a2a0c;
    --info: #93c5fd; --info-bg: #172554; --ok: #4ade80; --ok-bg: #0f2e1b; --off: #6b7280;
    --fresh: #3a3312; --accent: #60a5fa;
  }
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
html { background: var(--bg); color: var(--fg); }
body { margin: 0; font: 13px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { display: flex; align-items: baseline; gap: 10px; padding: 10px 16px; background: var(--card); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 1; }
header h1 { font-size: 16px; margin: 0; letter-spacing: .2px; }
header .spacer { flex: 1; }
.status { font-size: 12px; padding: 1px 8px; border-radius: 10px; background: var(--line); }
.status::before { content: "● "; }
.status.live { color: var(--ok); background: var(--ok-bg); }
.status.connecting { color: var(--warn); background: var(--warn-bg); }
.status.down { color: var(--crit); background: var(--crit-bg); }
.banner { margin: 12px 16px 0; padding: 8px 12px; border-radius: 6px; background: var(--warn-bg); color: var(--warn); }
main { display: grid; grid-template-columns: repeat(12, minmax(0, 1fr)); gap: 12px; padding: 12px 16px 24px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; min-width: 0; }
#sources-card { grid-column: span 6; }
#alerts-card { grid-column: span 6; }
#events-card { grid-column: span 12; }
#deliveries-card { grid-column: span 7; }
#silences-card { grid-column: span 5; }
@media (max-width: 1100px) { .card { grid-column: span 12 !important; } }
h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .6px; color: var(--muted); margin: 0 0 8px; display: flex; align-items: center; gap: 8px; }
h2 .count { text-transform: none; letter-spacing: 0; font-weight: 500; color: var(--fg); }
h2 .tools { margin-left: auto; text-transform: none; letter-spacing: 0; font-weight: 400; color: var(--fg); display: flex; gap: 6px; align-items: center; }
.count.bad { color: var(--crit); }
.err { margin: 0 0 8px; padding: 6px 8px; border-radius: 6px; background: var(--crit-bg); color: var(--crit); }
table { width: 100%; border-collapse: collapse; }
th { text-align: left; font-weight: 500; color: var(--muted); font-size: 12px; padding: 2px 6px 4px; border-bottom: 1px solid var(--line); }
td { padding: 4px 6px; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: anywhere; }
tr:last-child td { border-bottom: 0; }
tr.empty td, li.empty { color: var(--muted); padding: 10px 6px; }
.scroll { max-height: 460px; overflow: auto; }
.scroll thead th { position: sticky; top: 0; background: var(--card); }
.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
.nowrap { white-space: nowrap; }
.muted { color: var(--muted); }
.small { font-size: 11.5px; }
.bad { color: var(--crit); font-weight: 600; }
/* API and user text (domains, summaries, silence comments, errors) may hold bidi controls
   such as U+202E (right-to-left override): every inline element that can hold it is a bidi
   isolate, so it cannot reorder the text after it. A cell, a list item or a div already ends
   its paragraph. */
main :is(span, b, code, time), #instance { unicode-bidi: isolate; }
code { font: 12px/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.error-text { color: var(--crit); font-size: 12px; }
.warn-text { color: var(--warn); font-size: 12px; }
.sources-summary { margin: 0 0 6px; }
.problems { list-style: none; margin: 0 0 6px; padding: 0; }
.problem { padding: 4px 0; border-top: 1px solid var(--line); }
#sources-details > summary { cursor: pointer; color: var(--accent); font-size: 12px; margin: 2px 0 6px; }
#sources-details[open] > summary { margin-bottom: 8px; }
.error-text code { background: var(--crit-bg); padding: 0 4px; border-radius: 3px; }
.dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; vertical-align: middle; }
.dot-green { background: var(--ok); } .dot-amber { background: #f59e0b; } .dot-red { background: var(--crit); } .dot-off { background: var(--off); }
.sev, .badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 11px; font-weight: 600; line-height: 18px; white-space: nowrap; }
.sev-critical { color: var(--crit); background: var(--crit-bg); }
.sev-warning { color: var(--warn); background: var(--warn-bg); }
.sev-info, .sev-none { color: var(--info); background: var(--info-bg); }
.badge.firing, .badge.state-dead { color: #fff; background: var(--crit); }
.badge.resolved, .badge.state-delivered { color: var(--ok); background: var(--ok-bg); }
.badge.state-retrying { color: var(--warn); background: var(--warn-bg); }
.badge.state-expired, .badge.silenced, .badge.shadow { color: var(--muted); background: var(--line); }
tr.silenced td { color: var(--muted); }
.badge.state-active { color: #fff; background: var(--accent); }
.badge.state-pending { color: var(--info); background: var(--info-bg); }
tr.sev-row-critical td:first-child { box-shadow: inset 3px 0 var(--crit); }
tr.sev-row-warning td:first-child { box-shadow: inset 3px 0 #f59e0b; }
tr.fail td { background: var(--crit-bg); }
tr.retry td { background: var(--warn-bg); }
tr.fresh td { animation: fresh 4s ease-out; }
@keyframes fresh { from { background: var(--fresh); } to { background: transparent; } }
.summary { min-width: 16em; }
/* A phone (375 px): "Firing now" has no scroll box of its own, so its summary column
   gives way to the "since" and "silence…" column, and the margins shrink. */
@media (max-width: 600px) {
  main { padding: 8px 8px 16px; gap: 8px; }
  #alerts .summary { min-width: 8em; }
}
.filters { display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 8px; }
select, input, button { font: inherit; color: inherit; }
select, input[type=text], input[type=search] { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 3px 6px; }
input[type=search] { flex: 1; min-width: 12em; }
/* Labels come from the API (domains): never wider than the card, however long. */
.filters select { max-width: 100%; text-overflow: ellipsis; }
button { cursor: pointer; border: 1px solid var(--line); background: var(--card); border-radius: 6px; padding: 3px 10px; }
button:hover { border-color: var(--accent); }
button[type=submit] { background: var(--accent); border-color: var(--accent); color: #fff; }
button:disabled { opacity: .6; cursor: default; }
button.link { border: 0; background: none; padding: 0; color: var(--accent); font-size: 12px; }
#silence-form { display: grid; grid-template-columns: 1fr 6em; gap: 6px; margin-bottom: 6px; }
#silence-form input[name=match] { grid-column: 1 / -1; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
#silence-form .row { grid-column: 1 / -1; display: flex; gap: 6px; }
#silence-form .row input { flex: 1; min-width: 0; }
#silence-form .row input[name=duration] { flex: 0 0 5em; }
.form-result { margin: 0 0 8px; font-size: 12px; min-height: 1em; }
.form-result.ok { color: var(--ok); } .form-result.bad { color: var(--crit); }
#silences { list-style: none; margin: 0; padding: 0; max-height: 320px; overflow: auto; }
.silence { padding: 6px 0; border-top: 1px solid var(--line); }
.silence-head { display: flex; align-items: center; gap: 8px; }
.silence-head .match { flex: 1; overflow-wrap: anywhere; }
.silence-expired { opacity: .65; }
label.check { display: inline-flex; gap: 4px; align-items: center; font-size: 12px; }
`;
