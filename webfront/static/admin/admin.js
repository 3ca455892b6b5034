// The operator console: plain DOM, no build step, no inline code (a strict CSP applies).
"use strict";

const REFRESH_MS = 5000;
const $ = (id) => document.getElementById(id);
let refreshTimer = null;
let currentDetail = null; // ["player" | "village", id] shown in the detail pane

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const options = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method !== "GET") {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body || {});
  }
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data.error || {};
    if (response.status === 401 && !path.endsWith("/login")) showLogin();
    throw new ApiError(response.status, error.code || "error", error.message || response.statusText);
  }
  return data;
}

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const when = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "-");
const num = (value) => el("td", { class: "num" }, value === null || value === undefined ? "-" : value);
const json = (value) => el("pre", {}, value === null || value === undefined ? "" : JSON.stringify(value));

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function say(text, isError) {
  const message = $("message");
  message.textContent = text;
  message.className = isError ? "message error" : "message";
}

function showLogin() {
  stopRefresh();
  $("console").hidden = true;
  $("who").hidden = true;
  $("login-section").hidden = false;
}

function showConsole(operator) {
  $("login-section").hidden = true;
  $("operator-name").textContent = operator.name;
  $("who").hidden = false;
  $("console").hidden = false;
  refresh();
  startRefresh();
}

function startRefresh() {
  stopRefresh();
  refreshTimer = setInterval(() => {
    if (!document.hidden) refresh();
  }, REFRESH_MS);
}

function stopRefresh() {
  if (refreshTimer !== null) clearInterval(refreshTimer);
  refreshTimer = null;
}

async function refresh() {
  try {
    const [overview, audit] = await Promise.all([
      api("GET", "/admin/api/overview"),
      api("GET", "/admin/api/audit?limit=50"),
    ]);
    renderOverview(overview);
    renderAudit(audit.entries);
  } catch (error) {
    if (error.status !== 401) say(`refresh failed: ${error.message}`, true);
  }
}

function card(label, value, bad) {
  return el("div", { class: "card", "data-card": label },
    el("div", { class: "label" }, label),
    el("div", { class: bad ? "value bad" : "value" }, value === null || value === undefined ? "-" : value));
}

function renderOverview(o) {
  $("refreshed").textContent = `as of ${when(o.now_ms)} UTC`;
  const world = o.world || {};
  const q = o.queue;
  $("cards").replaceChildren(
    card("players", world.players),
    card("villages", world.villages),
    card("banned", world.banned),
    card("events/s", o.events_per_s),
    card("queue depth", q.depth),
    card("ready", q.ready),
    card("in flight", q.inflight),
    card("dead letters", q.dead, q.dead > 0),
    card("max lag s", (q.max_lag_ms / 1000).toFixed(1), q.max_lag_ms > 5000),
    card("tick avg ms", o.tick.avg_ms),
    card("tick overruns", o.tick.overruns_total, o.tick.overruns_total > 0),
    card("task servers", o.task_servers.length, o.task_servers.length === 0),
  );
  fill($("health").tBodies[0], ["redis", "db"].map((name) => {
    const h = o.health[name];
    const detail = Object.entries(h).filter(([k]) => k !== "ok").map(([k, v]) => `${k} ${v}`).join(", ");
    return el("tr", {}, el("th", {}, name === "db" ? "database" : "Redis"),
      el("td", { class: h.ok ? "ok" : "bad", "data-health": name }, h.ok ? "ok" : "down"),
      el("td", {}, detail));
  }));
  fill($("servers").tBodies[0], o.task_servers.map((s) => el("tr", {},
    el("td", {}, s.name), num(s.events_per_s), num(s.partitions_held),
    num(s.tick && s.tick.avg_ms), num(s.tick && s.tick.p99_ms_at_most),
    num(s.tick && s.tick.overruns_total),
    el("td", {}, Object.keys(s.clock_offsets_ms || {}).length ? json(s.clock_offsets_ms) : "not measured"),
    el("td", {}, when(s.updated_ms)))));
  fill($("partitions").tBodies[0], q.partitions.map((p) => el("tr", {},
    num(p.partition), num(p.depth), num(p.ready), num(p.inflight), num(p.dead),
    el("td", { class: p.lag_ms > 5000 ? "num bad" : "num" }, (p.lag_ms / 1000).toFixed(1)))));
  fill($("dead").tBodies[0], o.dead_letters.map(deadRow));
}

function deadRow(d) {
  return el("tr", { "data-event": d.id },
    el("td", {}, d.id), el("td", {}, d.kind || "(unreadable)"),
    el("td", {}, d.village_id === null ? "-" : villageLink(d.village_id)),
    num(d.attempts), el("td", {}, when(d.died_ms)), el("td", {}, d.error), el("td", {}, json(d.payload)),
    el("td", {},
      el("button", { type: "button", onclick: () => deadAction(d.id, "requeue") }, "Requeue"), " ",
      el("button", { type: "button", class: "danger", onclick: () => deadAction(d.id, "drop") }, "Drop")));
}

async function deadAction(id, action) {
  if (action === "drop" && !confirm(`Drop event ${id} for good?`)) return;
  try {
    const result = await api("POST", `/admin/api/dead/${id}/${action}`, {});
    say(`event ${id}: ${result.outcome}`);
  } catch (error) {
    say(`event ${id}: ${error.message}`, true);
  }
  refresh();
  reloadDetail();
}

function renderAudit(entries) {
  fill($("audit-log").tBodies[0], entries.map((e) => el("tr", { "data-action": e.action },
    el("td", {}, when(e.at_ms)), el("td", {}, e.operator), el("td", {}, e.action),
    el("td", {}, e.target), el("td", {}, json(e.detail)))));
}

function villageLink(id) {
  return el("a", { href: "#", onclick: (event) => { event.preventDefault(); showVillage(id); } }, `#${id}`);
}

function table(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function villageSection(t) {
  const v = t.village;
  const game = t.game || {};
  const parts = [
    el("h3", {}, `Village #${v.id} ${v.name} (${v.x}|${v.y}), partition ${v.partition}`),
    el("h4", {}, "Pending, failing and dead events"),
    table(["event", "kind", "state", "due", "attempts", "reason", "payload"], t.events.map((e) =>
      el("tr", { class: e.state === "pending" ? "" : "bad" }, el("td", {}, e.id), el("td", {}, e.kind),
        el("td", {}, e.state), el("td", {}, when(e.due_ms)), num(e.attempts), el("td", {}, e.error || ""),
        el("td", {}, json(e.payload))))),
    el("h4", {}, "Dead letters"),
    table(["event", "kind", "village", "attempts", "died", "reason", "payload", ""], t.dead_letters.map(deadRow)),
    el("h4", {}, "Processed (latest)"),
    table(["event", "kind", "processed"], t.processed.map((e) =>
      el("tr", {}, el("td", {}, e.id), el("td", {}, e.kind), el("td", {}, when(e.processed_ms))))),
  ];
  for (const [section, rows] of Object.entries(game)) {
    const keys = rows.length ? Object.keys(rows[0]) : [];
    parts.push(el("h4", {}, section), table(keys, rows.map((row) =>
      el("tr", {}, keys.map((k) => {
        const value = row[k];
        if (k.endsWith("_ms")) return el("td", {}, when(value));
        return el("td", {}, typeof value === "object" && value !== null ? json(value) : value);
      })))));
  }
  return el("div", { class: "village" }, parts);
}

async function showPlayer(id) {
  currentDetail = ["player", id];
  try {
    const t = await api("GET", `/admin/api/players/${id}`);
    const p = t.player;
    const reason = el("input", { id: "ban-reason", placeholder: "reason", maxlength: "200" });
    const banControls = p.ban
      ? [el("span", { class: "bad", id: "ban-state" }, `banned since ${when(p.ban.since_ms)}: ${p.ban.reason}`), " ",
        el("button", { type: "button", id: "unban", onclick: () => banAction(p.id, "unban") }, "Unban")]
      : [el("span", { id: "ban-state" }, "not banned"), " ", reason, " ",
        el("button", { type: "button", id: "ban", class: "danger",
          onclick: () => banAction(p.id, "ban", reason.value) }, "Ban")];
    $("detail").replaceChildren(
      el("h3", {}, `Player #${p.id} ${p.name}`),
      el("p", {}, `created ${when(p.created_ms)} UTC, ${p.live_sessions} live session(s)${p.is_bot ? ", bot" : ""}`),
      el("p", {}, banControls),
      ...t.villages.map(villageSection));
  } catch (error) {
    $("detail").replaceChildren(el("p", { class: "error" }, error.message));
  }
}

async function showVillage(id) {
  currentDetail = ["village", id];
  try {
    $("detail").replaceChildren(villageSection(await api("GET", `/admin/api/villages/${id}`)));
  } catch (error) {
    $("detail").replaceChildren(el("p", { class: "error" }, error.message));
  }
}

function reloadDetail() {
  if (!currentDetail) return;
  const [kind, id] = currentDetail;
  if (kind === "player") showPlayer(id);
  else showVillage(id);
}

async function banAction(playerId, action, reason) {
  try {
    const body = action === "ban" ? { reason: (reason || "").trim() || "no reason given" } : {};
    const result = await api("POST", `/admin/api/players/${playerId}/${action}`, body);
    say(action === "ban"
      ? `player ${playerId} banned, ${result.sessions_revoked} session(s) revoked`
      : `player ${playerId} unbanned`);
  } catch (error) {
    say(`player ${playerId}: ${error.message}`, true);
  }
  showPlayer(playerId);
  refresh();
}

async function findPlayers(event) {
  event.preventDefault();
  try {
    const found = await api("GET", `/admin/api/players?name=${encodeURIComponent($("player-name").value)}`);
    $("player-results").replaceChildren(...found.players.map((p) => el("li", {},
      el("a", { href: "#", "data-player": p.id, onclick: (e) => { e.preventDefault(); showPlayer(p.id); } },
        `${p.name} (#${p.id})`), p.banned ? " banned" : "")));
  } catch (error) {
    say(error.message, true);
  }
}

function findVillage(event) {
  event.preventDefault();
  const id = $("village-id").value.trim();
  if (/^\d+$/.test(id)) showVillage(id);
  else say("a village id is a number", true);
}

async function replayReport(event) {
  event.preventDefault();
  const id = $("report-id").value.trim();
  const out = $("replay-result");
  if (!/^\d+$/.test(id)) {
    out.replaceChildren(el("p", { class: "error" }, "a report id is a number"));
    return;
  }
  try {
    const r = await api("POST", `/admin/api/reports/${id}/replay`, {});
    const verdict = r.equal === null ? (r.reason || "not a battle")
      : r.equal ? "replay equals the stored result" : `replay DIFFERS from the stored result ${r.reason || ""}`;
    out.replaceChildren(
      el("p", { class: `equal-${r.equal}`, id: "replay-verdict" }, verdict),
      r.seed ? el("p", {}, `seed ${r.seed}, ruleset ${r.ruleset}`) : null,
      r.stored ? table(["stored", "replayed"], [el("tr", {}, el("td", {}, json(r.stored)), el("td", {}, json(r.replayed)))]) : null);
  } catch (error) {
    out.replaceChildren(el("p", { class: "error" }, error.message));
  }
  refresh();
}

async function login(event) {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const operator = await api("POST", "/admin/api/login",
      { name: $("login-name").value, password: $("login-password").value });
    $("login-password").value = "";
    showConsole(operator);
  } catch (error) {
    $("login-error").textContent = error.message;
  }
}

async function logout() {
  try {
    await api("POST", "/admin/api/logout", {});
  } finally {
    showLogin();
  }
}

async function start() {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", logout);
  $("player-search").addEventListener("submit", findPlayers);
  $("village-search").addEventListener("submit", findVillage);
  $("replay-form").addEventListener("submit", replayReport);
  try {
    showConsole(await api("GET", "/admin/api/me"));
  } catch (error) {
    showLogin();
  }
}

document.addEventListener("DOMContentLoaded", start);
