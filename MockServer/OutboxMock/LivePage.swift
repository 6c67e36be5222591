/// The live page at `/_mock/` (SPEC M4): one self-contained HTML file — no external resources —
/// that polls `/_mock/stats` and `/_mock/histogram` every second.
enum LivePage {
    static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <title>outbox-mock</title>
    <link rel="icon" href="data:,">
    <style>
      :root { --bg:#0f172a; --card:#1e293b; --fg:#e2e8f0; --dim:#94a3b8; --ok:#22c55e; --warn:#f59e0b;
              --err:#ef4444; --info:#38bdf8; --fault:#a855f7; }
      * { box-sizing: border-box; }
      body { margin:0; padding:20px; background:var(--bg); color:var(--fg);
             font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
      h1 { margin:0 0 4px; font-size:20px; }
      .sub { color:var(--dim); margin-bottom:16px; }
      .sub b { color:var(--fg); font-weight:600; }
      .grid { display:grid; grid-template-columns:repeat(4, 1fr); gap:12px; margin-bottom:12px; }
      .card { background:var(--card); border-radius:8px; padding:12px 14px; }
      .num { font-size:26px; font-weight:700; font-variant-numeric:tabular-nums; }
      .lbl { color:var(--dim); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
      .row { display:grid; grid-template-columns:1fr 1fr; gap:12px; margin-bottom:12px; }
      h2 { font-size:13px; color:var(--dim); text-transform:uppercase; letter-spacing:.05em; margin:0 0 10px; }
      .bar { display:flex; height:22px; border-radius:4px; overflow:hidden; background:#334155; }
      .bar div { height:100%; }
      .legend { display:flex; flex-wrap:wrap; gap:10px; margin-top:8px; }
      .legend span { display:inline-flex; align-items:center; gap:5px; font-variant-numeric:tabular-nums; }
      .sw { width:10px; height:10px; border-radius:2px; display:inline-block; }
      table { width:100%; border-collapse:collapse; font-variant-numeric:tabular-nums; }
      #vendors td { text-align:right; }
      #vendors td:first-child, #vendors th:first-child { text-align:left; }
      #vendors th { color:var(--dim); font-size:12px; font-weight:500; text-align:right; padding:3px 0; }
      td { padding:3px 0; border-bottom:1px solid #334155; }
      td:last-child { text-align:right; font-weight:600; }
      .hist { display:flex; align-items:flex-end; gap:6px; height:150px; padding-top:8px; }
      .col { flex:1; display:flex; flex-direction:column; align-items:center; justify-content:flex-end; height:100%; }
      .col .b { width:100%; background:var(--info); border-radius:3px 3px 0 0; min-height:1px; }
      .col .c { font-size:11px; color:var(--fg); margin-bottom:2px; font-variant-numeric:tabular-nums; }
      .col .l { font-size:10px; color:var(--dim); margin-top:4px; white-space:nowrap; }
      .pct { display:flex; gap:16px; margin-top:10px; color:var(--dim); }
      .pct b { color:var(--fg); }
      .none { color:var(--dim); font-style:italic; }
      #err { color:var(--err); }
    </style>
    </head>
    <body>
    <h1>outbox-mock</h1>
    <div class="sub">Live view of the mock ingestion server · refreshed every second · <span id="updated">loading…</span> <span id="err"></span></div>
    <div class="grid">
      <div class="card"><div class="num" id="requests">–</div><div class="lbl">requests</div></div>
      <div class="card"><div class="num" id="logs_received">–</div><div class="lbl">logs received</div></div>
      <div class="card"><div class="num" id="logs_unique">–</div><div class="lbl">unique logs</div></div>
      <div class="card"><div class="num" id="logs_duplicate">–</div><div class="lbl">duplicates absorbed</div></div>
      <div class="card"><div class="num" id="late_logs">–</div><div class="lbl">late logs (after 04:00 next day)</div></div>
      <div class="card"><div class="num" id="max_in_flight">–</div><div class="lbl">max in flight</div></div>
      <div class="card"><div class="num" id="installs">–</div><div class="lbl">installs</div></div>
      <div class="card"><div class="num" id="fault_total">–</div><div class="lbl">faults injected</div></div>
    </div>
    <div class="row">
      <div class="card"><h2>Status mix</h2><div class="bar" id="statusbar"></div><div class="legend" id="statuslegend"></div></div>
      <div class="card"><h2>Faults injected</h2><table id="faults"></table></div>
    </div>
    <div class="card" style="margin-bottom:12px"><h2>Vendors</h2><table id="vendors"></table></div>
    <div class="card"><h2>Delivery delay (arrival − timestamp, unique logs and events)</h2>
      <div class="hist" id="hist"></div>
      <div class="pct" id="pct"></div>
    </div>
    <script>
    "use strict";
    const el = id => document.getElementById(id);
    const fmt = n => Number(n).toLocaleString("en-US");
    function color(status) {
      const s = Number(status);
      if (s < 300) return "var(--ok)";
      if (s === 429 || s === 408) return "var(--warn)";
      if (s < 500) return "#fb923c";
      return "var(--err)";
    }
    function ms(v) {
      const a = Math.abs(v);
      if (a < 1000) return v + " ms";
      if (a < 60000) return (v / 1000).toFixed(1) + " s";
      if (a < 3600000) return (v / 60000).toFixed(1) + " min";
      return (v / 3600000).toFixed(1) + " h";
    }
    function render(stats, hist) {
      for (const k of ["requests", "logs_received", "logs_unique", "logs_duplicate", "late_logs", "max_in_flight"])
        el(k).textContent = fmt(stats[k]);
      el("installs").textContent = fmt(Object.keys(stats.installs).length);
      const faults = Object.entries(stats.faults).sort();
      el("fault_total").textContent = fmt(faults.reduce((s, [, n]) => s + n, 0));
      const statuses = Object.entries(stats.status_counts).sort();
      const total = statuses.reduce((s, [, n]) => s + n, 0);
      el("statusbar").innerHTML = statuses.map(([s, n]) =>
        `<div title="${s}: ${n}" style="width:${100 * n / total}%;background:${color(s)}"></div>`).join("");
      el("statuslegend").innerHTML = statuses.length ? statuses.map(([s, n]) =>
        `<span><i class="sw" style="background:${color(s)}"></i>${s}: ${fmt(n)} (${(100 * n / total).toFixed(1)}%)</span>`).join("")
        : '<span class="none">no answers yet</span>';
      el("faults").innerHTML = faults.length ? faults.map(([k, n]) =>
        `<tr><td><i class="sw" style="background:var(--fault)"></i> ${k}</td><td>${fmt(n)}</td></tr>`).join("")
        : '<tr><td class="none">none</td><td></td></tr>';
      const cols = ["requests", "events_received", "events_unique", "events_duplicate", "events_refused"];
      el("vendors").innerHTML = "<tr><th>vendor</th>" + cols.map(c => `<th>${c.replace("events_", "")}</th>`).join("") +
        "</tr>" + Object.entries(stats.vendors || {}).sort().map(([v, c]) =>
          `<tr><td>${v}</td>` + cols.map(k => `<td>${fmt(c[k])}</td>`).join("") + "</tr>").join("");
      const max = Math.max(1, ...hist.buckets.map(b => b.count));
      el("hist").innerHTML = hist.buckets.map(b =>
        `<div class="col"><div class="c">${b.count ? fmt(b.count) : ""}</div>` +
        `<div class="b" style="height:${b.count ? Math.max(2, 100 * b.count / max) : 0}%"></div>` +
        `<div class="l">${b.label}</div></div>`).join("");
      const d = stats.delay_ms;
      el("pct").innerHTML = `<span>p50 <b>${ms(d.p50)}</b></span><span>p90 <b>${ms(d.p90)}</b></span>` +
        `<span>p99 <b>${ms(d.p99)}</b></span><span>max <b>${ms(d.max)}</b></span>`;
    }
    async function tick() {
      try {
        const [s, h] = await Promise.all([fetch("/_mock/stats", {cache: "no-store"}),
                                          fetch("/_mock/histogram", {cache: "no-store"})]);
        render(await s.json(), await h.json());
        el("updated").textContent = "updated " + new Date().toLocaleTimeString();
        el("err").textContent = "";
      } catch (e) {
        el("err").textContent = "server unreachable (" + e.message + ")";
      }
    }
    tick();
    setInterval(tick, 1000);
    </script>
    </body>
    </html>
    """#
}
