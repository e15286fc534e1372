// The meta-server console. Every text that comes from the server (and so from upstreams) is
// set with textContent or createTextNode, never as HTML.
"use strict";

const session = { csrf: null, name: null, tokens: [] };
const $ = (id) => document.getElementById(id);

/** An element with a class and text (the text as text). */
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function status(text, isError) {
  const s = $("status");
  s.textContent = text || "";
  s.className = isError ? "status error" : "status";
}

/** A request to the console's API; POSTs carry the session's CSRF token. */
async function api(path, body) {
  const options = { credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    if (session.csrf) options.headers["X-CSRF-Token"] = session.csrf;
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (response.status === 401 || response.status === 403) {
    if (path !== "/console/login" && path !== "/console/api/session") showLogin(data && data.error);
  }
  if (!response.ok) {
    const message = (data && data.error) || ("HTTP " + response.status);
    throw new Error(message);
  }
  return data;
}

// Characters that do not show but can carry or hide text: shown as ⟨U+XXXX⟩.
function invisible(code) {
  return (code < 0x20 && code !== 0x0a && code !== 0x09) || (code >= 0x7f && code <= 0x9f) ||
    code === 0xad || code === 0x34f || code === 0x61c || code === 0x115f || code === 0x1160 ||
    code === 0x17b4 || code === 0x17b5 || code === 0x180e || (code >= 0x200b && code <= 0x200f) ||
    (code >= 0x202a && code <= 0x202e) || (code >= 0x2060 && code <= 0x206f) || code === 0x3164 ||
    (code >= 0xfe00 && code <= 0xfe0f) || code === 0xfeff || code === 0xffa0 ||
    (code >= 0xfff0 && code <= 0xfffb) || (code >= 0x1d173 && code <= 0x1d17a) ||
    (code >= 0xe0000 && code <= 0xe0fff);
}

/** `text` as nodes, its invisible characters made visible. */
function reveal(text) {
  const out = document.createDocumentFragment();
  let plain = "";
  for (const ch of String(text)) {
    const code = ch.codePointAt(0);
    if (invisible(code)) {
      if (plain) { out.appendChild(document.createTextNode(plain)); plain = ""; }
      out.appendChild(el("span", "⟨U+" + code.toString(16).toUpperCase().padStart(4, "0") + "⟩", "hidden-char"));
    } else {
      plain += ch;
    }
  }
  if (plain) out.appendChild(document.createTextNode(plain));
  return out;
}

function cell(row, content, cls) {
  const td = el("td", null, cls);
  if (content instanceof Node) td.appendChild(content); else if (content !== undefined && content !== null) td.textContent = String(content);
  row.appendChild(td);
  return td;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

function when(rfc3339) {
  if (!rfc3339) return "";
  const d = new Date(rfc3339);
  return isNaN(d) ? String(rfc3339) : d.toLocaleString();
}

// --- sign-in -------------------------------------------------------------------------------

function showLogin(message) {
  $("login").hidden = false;
  $("tabs").hidden = true;
  $("who").hidden = true;
  for (const v of document.querySelectorAll(".view")) v.hidden = true;
  $("login-error").textContent = message || "";
}

async function start() {
  try {
    const me = await api("/console/api/session");
    session.csrf = me.csrf;
    session.name = me.name;
    session.tokens = me.tokens || [];
  } catch (e) {
    showLogin(e.message === "HTTP 401" ? "" : e.message);
    return;
  }
  $("login").hidden = true;
  $("tabs").hidden = false;
  $("who").hidden = false;
  $("who-name").textContent = "signed in as " + session.name;
  const select = $("s-as");
  clear(select);
  for (const name of session.tokens) {
    const option = el("option", name);
    option.value = name;
    if (name === session.name) option.selected = true;
    select.appendChild(option);
  }
  show();
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("login-token").value;
  $("login-token").value = "";
  try {
    await api("/console/login", { token });
    await start();
  } catch (e) {
    $("login-error").textContent = e.message;
  }
});

$("logout").addEventListener("click", async () => {
  try { await api("/console/logout", {}); } catch (_) { /* signed out either way */ }
  session.csrf = null;
  showLogin("signed out");
});

// --- views ---------------------------------------------------------------------------------

const views = { servers: loadServers, review: loadReview, activity: loadActivity, search: () => {} };

function show() {
  const name = (location.hash || "#servers").slice(1);
  const view = views[name] ? name : "servers";
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + view;
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.view === view);
  status("");
  views[view]().catch((e) => status(e.message, true));
}

window.addEventListener("hashchange", () => { if (session.csrf !== null || session.name) show(); });

// Servers

async function loadServers() {
  const data = await api("/console/api/servers");
  $("servers-trust").textContent = "Trust mode: " + data.trust;
  const body = $("servers-table").tBodies[0];
  clear(body);
  for (const s of data.servers) {
    const row = el("tr");
    row.dataset.server = s.name;
    const name = cell(row, s.name);
    if (s.description) name.title = s.description;
    cell(row, s.transport);
    const state = cell(row, s.state, "state-" + s.state);
    if (s.reason) state.appendChild(el("div", s.reason, "note"));
    cell(row, s.revision || "");
    cell(row, s.tools === null ? "no catalog" : s.tools, "num");
    cell(row, when(s.listedAt));
    cell(row, s.login ? s.login.state : "");
    const held = cell(row, null);
    for (const q of s.quarantined) held.appendChild(el("div", q, "outcome-quarantined"));
    const action = cell(row, null);
    const refresh = el("button", "Refresh");
    refresh.type = "button";
    refresh.addEventListener("click", async () => {
      refresh.disabled = true;
      status("refreshing " + s.name + "…");
      try {
        await api("/console/api/refresh", { server: s.name });
        status("refreshed " + s.name);
        await loadServers();
      } catch (e) { status(e.message, true); refresh.disabled = false; }
    });
    action.appendChild(refresh);
    body.appendChild(row);
  }
}
$("servers-reload").addEventListener("click", () => loadServers().catch((e) => status(e.message, true)));

// Review

function shown(value) {
  if (value === undefined || value === null) return "(none)";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/** The fields of an item as [key, value] pairs (instructions, a text, as one field). */
function fields(item) {
  if (item && typeof item === "object" && !Array.isArray(item)) return Object.entries(item);
  return item === undefined || item === null ? [] : [["text", item]];
}

async function approve(server, name) {
  status("approving " + (name || "everything of " + server) + "…");
  const done = await api("/console/api/approve", name ? { server, name } : { server });
  status("approved " + done.approved.join(", "));
  await loadReview();
}

async function loadReview() {
  const data = await api("/console/api/review");
  const list = $("review-list");
  clear(list);
  if (data.trust === "off") list.appendChild(el("p", "Trust is off (metaServer.trust): nothing is pinned or quarantined.", "note"));
  const waiting = data.items.filter((t) => t.quarantined);
  if (!waiting.length) list.appendChild(el("p", "Nothing waits for approval.", "note"));
  const servers = [...new Set(waiting.map((t) => t.server))];
  for (const server of servers) {
    const all = el("button", "Approve all of " + server, "primary");
    all.type = "button";
    all.dataset.approveServer = server;
    all.addEventListener("click", () => approve(server, null).catch((e) => status(e.message, true)));
    list.appendChild(all);
    list.appendChild(document.createTextNode(" "));
  }
  for (const t of data.items) {
    const card = el("div", null, "card");
    card.dataset.item = t.name;
    const title = el("h3", t.name);
    title.appendChild(el("span", t.kind, "kind"));
    card.appendChild(title);
    if (t.quarantined) card.appendChild(el("p", "Quarantined: " + t.quarantined, "why"));
    else card.appendChild(el("p", "Approved; its texts are flagged.", "note"));
    for (const flag of t.flags || []) card.appendChild(el("p", "⚑ " + flag, "flag"));
    const table = el("table", null, "diff");
    const head = el("tr");
    head.appendChild(el("th", "Field", "field"));
    head.appendChild(el("th", t.approved !== undefined && t.approved !== null ? "Approved" + (t.approvedAt ? " (" + t.approvedAt + ")" : "") : "Approved (none)"));
    head.appendChild(el("th", "Now"));
    table.appendChild(head);
    const old = new Map(fields(t.approved));
    const now = new Map(fields(t.current));
    const keys = [...now.keys(), ...[...old.keys()].filter((k) => !now.has(k))];
    for (const key of keys) {
      const row = el("tr");
      if (t.quarantined && JSON.stringify(old.get(key)) !== JSON.stringify(now.get(key))) row.className = "changed";
      row.appendChild(el("th", key, "field"));
      cell(row, reveal(t.approved !== undefined && t.approved !== null ? shown(old.get(key)) : ""), "old");
      cell(row, reveal(shown(now.get(key))), "new");
      table.appendChild(row);
    }
    card.appendChild(table);
    if (t.quarantined) {
      const actions = el("div", null, "actions");
      const one = el("button", "Approve " + t.name, "primary");
      one.type = "button";
      one.dataset.approve = t.name;
      one.addEventListener("click", () => approve(t.server, t.name).catch((e) => status(e.message, true)));
      actions.appendChild(one);
      card.appendChild(actions);
    }
    list.appendChild(card);
  }
}
$("review-reload").addEventListener("click", () => loadReview().catch((e) => status(e.message, true)));

// Activity

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attributes || {})) node.setAttribute(k, String(v));
  return node;
}

/** One server's last hour: calls per minute (bars), errors (red), mean latency (line). */
function chart(server, minutes, now) {
  const width = 380, height = 120, left = 30, bottom = 16, top = 6;
  const plotW = width - left - 56, plotH = height - top - bottom;
  const slot = plotW / 60;
  const series = [];
  for (let i = 59; i >= 0; i--) {
    const minute = now - i;
    const m = minutes.find((x) => x.minute === minute);
    const b = m && m.servers[server];
    series.push(b ? { calls: b.calls, errors: b.errors, mean: b.calls ? b.totalMs / b.calls : 0 } : { calls: 0, errors: 0, mean: 0 });
  }
  const maxCalls = Math.max(1, ...series.map((s) => s.calls));
  const maxMs = Math.max(1, ...series.map((s) => s.mean));
  const box = el("div", null, "chart");
  box.dataset.server = server;
  const total = series.reduce((a, s) => a + s.calls, 0), errors = series.reduce((a, s) => a + s.errors, 0);
  box.appendChild(el("p", server + ": " + total + " calls, " + errors + " errors; bars calls/min (max " + maxCalls + "), line mean ms (max " + Math.round(maxMs) + ")", "title"));
  const root = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, role: "img" });
  root.appendChild(svg("line", { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH, class: "axis" }));
  root.appendChild(svg("line", { x1: left, y1: top, x2: left, y2: top + plotH, class: "axis" }));
  const label = (x, y, text, anchor) => { const t = svg("text", { x, y, "text-anchor": anchor || "start" }); t.textContent = text; root.appendChild(t); };
  label(left - 4, top + 8, String(maxCalls), "end");
  label(left - 4, top + plotH, "0", "end");
  label(left + plotW + 4, top + 8, Math.round(maxMs) + "ms");
  label(left, height - 3, "-60 min");
  label(left + plotW, height - 3, "now", "end");
  const points = [];
  series.forEach((s, i) => {
    const x = left + i * slot;
    if (s.calls) {
      const h = (s.calls / maxCalls) * plotH;
      const bar = svg("rect", { x: x + 0.5, y: top + plotH - h, width: Math.max(1, slot - 1), height: h, class: "calls" });
      const tip = svg("title"); tip.textContent = (60 - i) + " min ago: " + s.calls + " calls, " + s.errors + " errors, mean " + s.mean.toFixed(1) + " ms";
      bar.appendChild(tip);
      root.appendChild(bar);
      if (s.errors) {
        const eh = (s.errors / maxCalls) * plotH;
        root.appendChild(svg("rect", { x: x + 0.5, y: top + plotH - eh, width: Math.max(1, slot - 1), height: eh, class: "errors" }));
      }
      const y = top + plotH - (s.mean / maxMs) * plotH;
      points.push((x + slot / 2).toFixed(1) + "," + y.toFixed(1));
      root.appendChild(svg("circle", { cx: (x + slot / 2).toFixed(1), cy: y.toFixed(1), r: 2, class: "latency-dot" }));
    }
  });
  if (points.length > 1) root.appendChild(svg("polyline", { points: points.join(" "), class: "latency" }));
  box.appendChild(root);
  return box;
}

async function loadActivity() {
  const charts = await api("/console/api/charts");
  const holder = $("charts");
  clear(holder);
  const servers = [...new Set(charts.minutes.flatMap((m) => Object.keys(m.servers)))].sort();
  if (!servers.length) holder.appendChild(el("p", "No tool calls in the last hour.", "note"));
  for (const server of servers) holder.appendChild(chart(server, charts.minutes, charts.now));
  const q = new URLSearchParams();
  for (const [key, id] of [["server", "f-server"], ["tool", "f-tool"], ["token", "f-token"], ["outcome", "f-outcome"]]) {
    if ($(id).value) q.set(key, $(id).value);
  }
  const data = await api("/console/api/activity?" + q.toString());
  const note = $("activity-note");
  note.textContent = !data.configured ? "No audit log is configured (metaServer.audit.path)." : (data.error || data.lines.length + " lines, newest first");
  const body = $("activity-table").tBodies[0];
  clear(body);
  for (const line of data.lines) {
    const row = el("tr");
    cell(row, when(line.time));
    cell(row, line.kind);
    cell(row, line.principal || "");
    cell(row, line.server || "");
    cell(row, reveal(line.tool || line.prompt || line.uri || ""));
    cell(row, line.outcome, "outcome-" + line.outcome);
    cell(row, line.durationMs, "num");
    cell(row, line.resultBytes, "num");
    body.appendChild(row);
  }
}
$("activity-form").addEventListener("submit", (event) => { event.preventDefault(); loadActivity().catch((e) => status(e.message, true)); });
$("activity-reload").addEventListener("click", () => loadActivity().catch((e) => status(e.message, true)));

// Search

$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const q = new URLSearchParams({ q: $("s-query").value, as: $("s-as").value, limit: $("s-limit").value });
  if ($("s-server").value) q.set("server", $("s-server").value);
  const body = $("search-table").tBodies[0];
  clear(body);
  try {
    const data = await api("/console/api/search?" + q.toString());
    if (!data.ok) { $("search-summary").textContent = data.error || (data.result && data.result.hint) || "refused"; return; }
    const r = data.result;
    $("search-summary").textContent = "mode " + r.mode + ", " + (r.confident ? "confident" : "not confident") + ", " + r.hits.length + " hits as " + $("s-as").value + (r.hint ? " — " + r.hint : "");
    r.hits.forEach((hit, i) => {
      const row = el("tr");
      cell(row, i + 1, "num");
      cell(row, hit.name);
      cell(row, Number(hit.score).toFixed(3), "num");
      cell(row, reveal(hit.description || ""));
      cell(row, (hit.flags || []).join("; "));
      body.appendChild(row);
    });
  } catch (e) { status(e.message, true); }
});

start();
