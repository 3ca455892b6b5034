/* The reference game's browser client: plain JavaScript, no build step, no framework but the SDK.
 *
 * The server sends a snapshot (stocks with their rates, queues and marches with
 * due times) only when something changed. Between snapshots this page moves
 * the counters and countdowns itself, on the server's clock, so it can poll
 * rarely and cheaply (If-None-Match → 304). Talking to the server (session,
 * clock, polling, commands) is the framework's SDK, /sdk/webgame.js. While the
 * server's event stream is open, changes are pushed (the page fetches the snapshot
 * at once) and alerts such as an incoming attack show in a banner.
 */
import { WebGame } from '/sdk/webgame.js';
import { costNodes, icon } from './icons.js';
import { IncomingAlert } from './incoming.js';
import { centreOnVillage, initMap, mapSnapshot, refreshMap } from './map.js';
import { RankingsPanel } from './rankings.js';

export { setAllianceMembers } from './map.js';

const POLL_MIN_MS = 1000;
const POLL_MAX_MS = 15000;
const FRAME_MS = 100; // counters and countdowns are redrawn at most this often
const RECALL_FRACTION = 0.5; // refgame/travel.py: recall while less than half the way is done
const MS_PER_HOUR = 3600000;
const RESOURCES = ['wood', 'clay', 'iron', 'crop'];
// Until the rule tables are loaded (POST /api/rules), the units one can train are the
// reference game's (refgame/units.py); units a snapshot mentions are added to them.
const KNOWN_UNITS = ['legionnaire', 'praetorian', 'imperian', 'equites_imperatoris', 'equites_caesaris', 'settler'];
const REPORTS_PER_PAGE = 10;
const FIELDS = ['woodcutter', 'clay_pit', 'iron_mine', 'cropland']; // listed first

export const state = {
  loggedIn: false,
  snap: null, // the last snapshot
  villageId: null, // the village on screen
  pollFailed: false, // the message on screen is a failed poll's
  lastUnread: null, // the unread count the reports list was loaded for
  reportsPage: 1,
  unitsKey: '', // the units the troop inputs were built for (rebuilt only when it changes)
  lastFrame: 0,
  msgTimer: 0,
  rules: null, // the rule tables (costs, durations, unit stats), fetched once
  rulesLoading: null,
  incoming: null, // IncomingAlert: the banner and the tab title (incoming.js)
  rankings: null, // RankingsPanel (rankings.js)
};

const $ = (selector) => document.querySelector(selector);
const label = (name) => name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, ' ');

/* Builds an element. Text is always added as text nodes, never as HTML, because
 * player and village names are chosen by players. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

export function setText(node, text) {
  if (node && node.textContent !== text) node.textContent = text; // avoid needless layout work
}

export function fmtDuration(ms) {
  const s = Math.ceil(ms / 1000);
  const pad = (n) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

const fmtTime = (ms) => new Date(ms).toLocaleString();
const place = (p) => `${p.name ?? 'abandoned village'} (${p.x}|${p.y})`;
const troopText = (troops) =>
  troops ? Object.entries(troops).map(([u, n]) => `${n} ${label(u)}`).join(', ') : 'unknown troops';

/* ---- talking to the server: the framework's SDK ------------------------- */

export const game = new WebGame(); // social.js and trade.js share it
export const poller = game.poll({ minMs: POLL_MIN_MS, maxMs: POLL_MAX_MS });
export const serverNow = () => game.clock.now();

/* GET /api/<path>; an error is shown and answers null. */
const api = (path, params) => game.query(path, params).catch(failed);

/* A game command. The SDK retries what is safe to retry (no answer, events_pending)
 * with the same Idempotency-Key, so nothing is paid twice, and polls right after. */
export async function command(path, body, okText, button, onError = null) {
  clearErrors(); // a new action: the last one's errors are history
  if (button) button.disabled = true;
  try {
    await game.command(path, body);
    showMessage(okText, 'ok');
    return true;
  } catch (error) {
    if (!onError || !onError(error)) showMessage(error.message);
    return false;
  } finally {
    if (button) button.disabled = false;
  }
}

/* Something is expected to change (a countdown ended): poll soon, back-off reset. */
export function pollSoon(ms = 0) {
  poller.soon(ms);
}

/* ---- rendering ------------------------------------------------------------ */

export function village() {
  return state.snap?.villages.find((v) => String(v.id) === String(state.villageId)) ?? null;
}

/* The server's rule (common/amounts.py): max(0, min(cap, fixed + gain × dt)),
 * in fixed-point units; players see whole units, rounded down. */
function stockAt(stocks, resource, now) {
  const r = stocks[resource];
  const dt = Math.max(0, now - stocks.updated_ms);
  const gainPerMs = (r.rate_per_hour * stocks.scale) / MS_PER_HOUR;
  const fixed = Math.max(0, Math.min(r.cap * stocks.scale, r.fixed + gainPerMs * dt));
  return Math.floor(fixed / stocks.scale);
}

/* ---- know before you click: costs, times and what is missing ------------------ */

/* The rule tables, once per page: they do not change while a world runs. A plain POST
 * (no Idempotency-Key: it changes nothing, so nothing needs to be stored). */
function loadRules() {
  state.rulesLoading ??= game.send('POST', 'rules', { body: {} })
    .then((answer) => { state.rules = answer.data; if (state.snap) render(); })
    .catch((error) => { state.rulesLoading = null; failed(error); });
  return state.rulesLoading;
}

const costText = (cost) => Object.entries(cost).filter(([, n]) => n > 0).map(([r, n]) => `${n} ${r}`).join(', ');
const pctOf = (table, level) => table[Math.max(0, Math.min(level, table.length - 1))];

/* A building's next level: {level, cost, duration_ms} at this village's main building, or null. */
function nextBuild(v, kind, target) {
  const spec = state.rules?.buildings[kind];
  const row = spec?.levels[target - 1];
  if (!row) return null;
  const pct = pctOf(state.rules.main_building_time_pct, v.buildings.main_building ?? 0);
  return { ...row, duration_ms: Math.max(1, Math.ceil((row.duration_ms * pct) / 100)) };
}

/* Training ``count`` of ``unit`` here: {cost, duration_ms}, or null before the rules. */
function trainPlan(v, unit, count) {
  const spec = state.rules?.units[unit];
  if (!spec) return null;
  const pct = pctOf(state.rules.barracks_time_pct, v.buildings[spec.trained_in ?? 'barracks'] ?? 0);
  const cost = Object.fromEntries(Object.entries(spec.cost).map(([r, n]) => [r, n * count]));
  return { cost, duration_ms: Math.max(1, Math.ceil((count * spec.time_ms * pct) / 100)) };
}

/* What the stock lacks for ``cost`` now, and when production covers it (server ms), from
 * the snapshot's stocks and rates; ``when`` is null when it never will (a rate of 0 or
 * less, or more than the storage holds). */
function shortfall(v, cost, now) {
  const missing = {};
  let when = now;
  let tooBig = false;
  for (const [r, n] of Object.entries(cost)) {
    const have = stockAt(v.stocks, r, now);
    if (have >= n) continue;
    missing[r] = n - have;
    const s = v.stocks[r];
    tooBig ||= n > s.cap;
    if (when === null || s.rate_per_hour <= 0 || n > s.cap) {
      when = null;
      continue;
    }
    const fixedNow = Math.max(0, Math.min(s.cap * v.stocks.scale,
      s.fixed + ((s.rate_per_hour * v.stocks.scale) / MS_PER_HOUR) * Math.max(0, now - v.stocks.updated_ms)));
    const needFixed = n * v.stocks.scale - fixedNow;
    when = Math.max(when, now + Math.ceil((needFixed * MS_PER_HOUR) / (s.rate_per_hour * v.stocks.scale)));
  }
  return Object.keys(missing).length ? { missing, when, tooBig } : null;
}

/* The note beside a button: "Missing 120 wood; enough in 2:30 (at 14:02:10)". */
function shortText(v, cost, now) {
  const short = shortfall(v, cost, now);
  if (!short) return '';
  const when = short.tooBig ? 'more than the storage holds: build a bigger warehouse or granary'
    : short.when === null ? 'not at the current production'
    : `enough in ${fmtDuration(short.when - now)} (at ${new Date(short.when).toLocaleTimeString()})`;
  return `Missing ${costText(short.missing)}; ${when}`;
}

/* Redraws every affordability note (stocks grow between snapshots). */
function updateNotes(v, now) {
  for (const node of document.querySelectorAll('[data-cost]')) {
    const text = shortText(v, JSON.parse(node.dataset.cost), now);
    setText(node, text);
    node.hidden = !text;
  }
}

function applySnapshot(snap) {
  const firstOrMoved = !village() || !snap.villages.some((v) => String(v.id) === String(state.villageId));
  state.snap = snap;
  if (firstOrMoved) state.villageId = snap.villages[0]?.id ?? null;
  showGame(true);
  if (!state.rules) loadRules();
  state.incoming.fromSnapshot(snap);
  render();
  mapSnapshot(snap);
  if (firstOrMoved) centreOnVillage();
  if (firstOrMoved) state.rankings.load(snap.player_id);
  if (snap.unread_reports !== state.lastUnread) {
    state.lastUnread = snap.unread_reports; // a new report (or one was read): reload the list
    loadReports();
  }
}

function render() {
  const snap = state.snap;
  const v = village();
  setText($('#player-name'), snap.name);
  const select = $('#village-select');
  select.hidden = $('#village-select-label').hidden = snap.villages.length < 2;
  select.replaceChildren(...snap.villages.map((w) =>
    el('option', { value: String(w.id), selected: String(w.id) === String(state.villageId) }, w.name)));
  if (!v) {
    setText($('#village-title'), 'No village');
    return;
  }
  setText($('#village-title'), `${v.name} (${v.x}|${v.y})`);
  renderResources(v);
  renderBuildings(v);
  renderTroops(v);
  renderMarches(v);
  frame(true);
}

function renderResources(v) {
  $('#resources').replaceChildren(...RESOURCES.map((r) => {
    const s = v.stocks[r];
    const rate = s.rate_per_hour;
    return el('div', { class: 'res', dataset: { res: r } },
      el('span', { class: 'res-name' }, icon(r), label(r)),
      el('span', { class: 'amount', id: `res-${r}` }, String(s.units)),
      el('span', { class: 'cap' }, ` / ${s.cap}`),
      el('span', { class: rate < 0 ? 'rate negative' : 'rate' }, `${rate >= 0 ? '+' : ''}${rate}/h`));
  }));
}

function renderBuildings(v) {
  // The next level counts orders already queued for the same building.
  const next = {};
  for (const o of v.build_queue) next[o.kind] = Math.max(next[o.kind] ?? 0, o.target_level);
  const kinds = Object.keys(v.buildings).sort((a, b) =>
    (FIELDS.includes(b) - FIELDS.includes(a)) || a.localeCompare(b));
  $('#buildings').replaceChildren(...kinds.map((kind) => {
    const level = v.buildings[kind];
    const target = Math.max(level, next[kind] ?? 0) + 1;
    const plan = nextBuild(v, kind, target);
    const maxed = state.rules && target > state.rules.buildings[kind].max_level;
    const button = maxed ? el('span', { class: 'muted' }, 'maximum level') : el('button', {
      type: 'button',
      'aria-label': `${level ? 'Upgrade' : 'Build'} ${label(kind)} to level ${target}`,
      onclick: () => command('build', { village_id: v.id, kind },
        `${label(kind)}: level ${target} queued.`, button),
    }, level ? `Upgrade to ${target}` : 'Build');
    const info = plan && !maxed ? el('div', { class: 'cost small-text' },
      ...costNodes(plan.cost), ` · ${fmtDuration(plan.duration_ms)}`) : null;
    const note = plan && !maxed ? el('div', { class: 'short small-text', dataset: { cost: JSON.stringify(plan.cost) } }) : null;
    return el('tr', { dataset: { kind } },
      el('th', { scope: 'row' }, icon(kind, 24), label(kind)),
      el('td', { class: 'level' }, String(level)),
      el('td', {}, button, info, note));
  }));
  const now = serverNow();
  $('#build-queue').replaceChildren(...(v.build_queue.length ? v.build_queue.map((o) =>
    el('li', { dataset: { kind: o.kind } },
      icon(o.kind), `${label(o.kind)} → level ${o.target_level}`,
      o.started_ms > now ? el('span', { class: 'muted' }, ' (waiting)') : null,
      el('span', { class: 'countdown', dataset: { due: o.done_ms } })))
    : [el('li', { class: 'muted' }, 'Nothing is being built.')]));
}

function renderTroops(v) {
  const units = [...new Set([...KNOWN_UNITS, ...Object.keys(v.troops)])];
  const rows = units.filter((u) => v.troops[u]).map((u) =>
    el('tr', { dataset: { unit: u } }, el('th', { scope: 'row' }, icon(u, 24), label(u)), el('td', {}, String(v.troops[u]))));
  const other = (t, where) => el('tr', { class: 'muted' },
    el('th', { scope: 'row' }, `${label(t.unit)} (${where} village ${t.village_id})`), el('td', {}, String(t.count)));
  rows.push(...v.troops_away.map((t) => other(t, 'away in')), ...v.reinforcements.map((t) => other(t, 'from')));
  $('#troops').replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { class: 'muted' }, 'No troops at home.'))]));

  // The forms keep what the player typed: they are rebuilt only when the set of units changes.
  const key = units.join(',');
  if (key !== state.unitsKey) {
    state.unitsKey = key;
    $('#train-unit').replaceChildren(...units.map((u) => el('option', { value: u }, label(u))));
    $('#march-troops').replaceChildren(...units.map((u) => el('div', { class: 'troop-input' },
      el('label', { for: `march-${u}` }, icon(u), label(u), ' ', el('span', { class: 'muted', id: `home-${u}` })),
      el('input', { id: `march-${u}`, type: 'number', min: 0, value: 0, dataset: { unit: u } }),
      el('span', { class: 'field-error', id: `march-${u}-error`, role: 'alert', hidden: true }))));
  }
  for (const u of units) setText($(`#home-${u}`), `(${v.troops[u] ?? 0} home)`);
  renderTrainInfo(v);
  renderMarchPreview(v);
  const now = serverNow();
  $('#training-queue').replaceChildren(...(v.training_queue.length ? v.training_queue.map((o) =>
    el('li', {}, icon(o.unit), `${o.count} × ${label(o.unit)}`,
      o.started_ms > now ? el('span', { class: 'muted' }, ' (waiting)') : null,
      el('span', { class: 'countdown', dataset: { due: o.done_ms } })))
    : [el('li', { class: 'muted' }, 'No training.')]));
}

/* The game keeps a march's origin as its home, also on the way back ("return"):
 * a return march from this village is troops coming home, and one to this
 * village is another player's troops leaving it, which is not shown. Sorting
 * by ids, not by the list a march came in, keeps this right either way. */
function renderMarches(v) {
  const now = serverNow();
  const here = (p) => String(p.id) === String(v.id);
  const seen = new Set();
  const out = [];
  const incoming = [];
  for (const m of [...v.marches_out, ...v.marches_in]) {
    if (seen.has(String(m.id))) continue;
    seen.add(String(m.id));
    if (m.kind === 'return') {
      if (here(m.origin)) incoming.push(m);
    } else if (here(m.origin)) {
      out.push(m);
    } else if (here(m.target)) {
      incoming.push(m);
    }
  }
  const byArrival = (a, b) => a.arrive_ms - b.arrive_ms;
  const item = (m) => {
    const outgoing = m.kind !== 'return' && here(m.origin);
    const where = m.kind === 'return' ? `from ${place(m.target)}` : outgoing ? `→ ${place(m.target)}` : `from ${place(m.origin)}`;
    const hostile = !here(m.origin) && (m.kind === 'attack' || m.kind === 'raid');
    // recall is possible while less than half the travel time has passed
    const until = m.depart_ms + (m.arrive_ms - m.depart_ms) * RECALL_FRACTION;
    const recall = outgoing && now < until
      ? el('button', {
        type: 'button', class: 'small', dataset: { until }, 'aria-label': `Recall the ${m.kind} march`,
        onclick: (ev) => command('recall', { march_id: m.id }, 'The troops turn back.', ev.currentTarget),
      }, 'Recall')
      : null;
    return el('li', { class: hostile ? 'hostile' : null, dataset: { kind: m.kind } },
      el('strong', {}, label(m.kind)), ` ${where} `,
      el('span', { class: 'muted' }, m.troops ? troopText(m.troops) : ''),
      el('span', { class: 'countdown', dataset: { due: m.arrive_ms, doneText: 'arriving' } }),
      recall);
  };
  const fill = (node, marches, empty) => node.replaceChildren(...(marches.length
    ? marches.sort(byArrival).map(item) : [el('li', { class: 'muted' }, empty)]));
  fill($('#marches-out'), out, 'No troops on the way.');
  fill($('#marches-in'), incoming, 'Nothing is coming.');
}

/* The chosen unit's cost, time, upkeep and stats, and the order's total, before Train. */
function renderTrainInfo(v) {
  const unit = $('#train-unit').value;
  const count = Math.max(1, Math.floor(Number($('#train-count').value)) || 1);
  const spec = state.rules?.units[unit];
  const plan = trainPlan(v, unit, count);
  const note = $('#train-note');
  if (!spec || !plan) {
    $('#train-info').replaceChildren();
    delete note.dataset.cost;
    note.hidden = true;
    return;
  }
  const building = spec.trained_in ?? 'barracks';
  const barracks = v.buildings[building] ?? 0;
  $('#train-info').replaceChildren(
    el('div', {}, `One: ${costText(spec.cost)}, upkeep ${spec.upkeep} crop/h.`),
    el('div', {}, `Attack ${spec.attack}, defence ${spec.defense_infantry} (infantry) / ${spec.defense_cavalry} (cavalry), `
      + `speed ${spec.speed} fields/h, carries ${spec.carry}.`),
    el('div', { class: 'cost' }, barracks >= spec.barracks_level
      ? `${count} cost ${costText(plan.cost)} and take ${fmtDuration(plan.duration_ms)}.`
      : `Needs ${label(building)} level ${spec.barracks_level} (this village has ${barracks}).`));
  note.dataset.cost = JSON.stringify(plan.cost);
  updateNotes(v, serverNow());
}

/* The march form's troops (count > 0) and target, as typed. */
function marchInput() {
  const troops = {};
  for (const input of document.querySelectorAll('#march-troops input')) {
    const n = Math.floor(Number(input.value));
    if (n > 0) troops[input.dataset.unit] = n;
  }
  const x = $('#march-x').value === '' ? null : Number($('#march-x').value);
  const y = $('#march-y').value === '' ? null : Number($('#march-y').value);
  return { troops, x, y };
}

/* Travel time of the chosen troops to the chosen target (refgame/travel.py: the slowest
 * unit's speed × the world speed, straight-line distance), before sending. */
function marchTravel(v) {
  const { troops, x, y } = marchInput();
  const rules = state.rules;
  const units = Object.keys(troops).filter((u) => rules?.units[u]);
  if (!rules || x === null || y === null || !units.length || (x === v.x && y === v.y)) return null;
  const slowest = Math.min(...units.map((u) => rules.units[u].speed));
  const distance = Math.hypot(x - v.x, y - v.y);
  const ms = Math.max(1, Math.ceil((distance * MS_PER_HOUR) / (slowest * rules.world_speed)));
  const carry = units.reduce((sum, u) => sum + rules.units[u].carry * troops[u], 0);
  return { distance, ms, carry };
}

function renderMarchPreview(v) {
  const travel = marchTravel(v);
  const box = $('#march-preview');
  if (!travel) {
    delete box.dataset.travel;
    setText(box, 'Choose a target and troops to see the travel time.');
    return;
  }
  box.dataset.travel = String(travel.ms);
  updateArrival(serverNow());
}

/* The arrival clock moves with the server's clock until the march is sent. */
function updateArrival(now) {
  const box = $('#march-preview');
  if (!box.dataset.travel) return;
  const v = village();
  const travel = v && marchTravel(v);
  if (!travel) return;
  const arrive = new Date(now + travel.ms).toLocaleTimeString();
  const back = $('#march-kind').value === 'reinforce' ? ''
    : `, home again at ${new Date(now + 2 * travel.ms).toLocaleTimeString()}`;
  setText(box, `${travel.distance.toFixed(1)} fields: travel ${fmtDuration(travel.ms)}, `
    + `arrives ${arrive} server time${back}; carries up to ${travel.carry}.`);
}

/* Called every animation frame (paused by the browser in hidden tabs). */
function frame(force = false) {
  const wall = Date.now();
  if (state.snap && (force === true || wall - state.lastFrame >= FRAME_MS)) {
    state.lastFrame = wall;
    const now = serverNow();
    setText($('#clock'), new Date(now).toLocaleTimeString());
    const v = village();
    if (v) for (const r of RESOURCES) setText($(`#res-${r}`), String(stockAt(v.stocks, r, now)));
    if (v) updateNotes(v, now);
    if (v) updateArrival(now);
    state.incoming.tick(now);
    for (const node of document.querySelectorAll('[data-due]')) {
      const left = Number(node.dataset.due) - now;
      setText(node, left > 0 ? fmtDuration(left) : (node.dataset.doneText ?? 'done'));
      if (left <= 0 && !node.dataset.fired) {
        node.dataset.fired = '1';
        pollSoon(250); // a moment for the task server to apply the event
      }
    }
    for (const button of document.querySelectorAll('button[data-until]')) {
      if (now >= Number(button.dataset.until)) button.disabled = true;
    }
  }
  if (force !== true) requestAnimationFrame(frame);
}

/* ---- map and reports ------------------------------------------------------- */

/* A village on the map becomes the march target; ``focus``: and the form comes into view. */
function targetVillage(w, focus) {
  const v = village();
  const own = String(w.player_id) === String(state.snap?.player_id);
  $('#march-x').value = w.x;
  $('#march-y').value = w.y;
  $('#march-kind').value = own ? 'reinforce' : 'attack';
  showMessage(`Target: ${place(w)}, ${w.player_name ?? 'no owner'}.`, 'ok');
  if (v) renderMarchPreview(v);
  if (focus) {
    $('#march-form').scrollIntoView({ block: 'nearest' });
    ($('#march-troops input') ?? $('#march-kind')).focus({ preventScroll: true });
  }
}

async function loadReports(page = state.reportsPage) {
  const data = await api('reports', { page, per_page: REPORTS_PER_PAGE });
  if (!data) return;
  state.reportsPage = data.page;
  const pages = Math.max(1, Math.ceil(data.total / data.per_page));
  $('#reports-pages').replaceChildren(...(pages < 2 ? [] : [
    el('button', { type: 'button', class: 'small secondary', disabled: data.page <= 1, onclick: () => loadReports(data.page - 1) }, 'Newer'),
    el('span', { class: 'muted small-text' }, ` page ${data.page} of ${pages} `),
    el('button', { type: 'button', class: 'small secondary', disabled: data.page >= pages, onclick: () => loadReports(data.page + 1) }, 'Older'),
  ]));
  const badge = $('#unread');
  badge.hidden = !data.unread;
  setText(badge, `${data.unread} new`);
  $('#reports').replaceChildren(...(data.reports.length ? data.reports.map((r) =>
    el('li', { class: r.is_read ? null : 'unread' },
      el('button', { type: 'button', class: 'link', onclick: () => openReport(r.id) },
        r.is_read ? null : el('span', { class: 'dot', 'aria-label': 'unread' }, '● '),
        r.title),
      el('span', { class: 'muted' }, ` ${fmtTime(r.created_ms)}`)))
    : [el('li', { class: 'muted' }, 'No reports yet.')]));
}

async function openReport(id) {
  const report = await api(`reports/${id}`);
  if (!report) return;
  pollSoon(0); // reading it changed the unread count
  const box = $('#report-detail');
  box.hidden = false;
  box.replaceChildren(
    el('h3', {}, report.title, ' ', el('button', { type: 'button', class: 'small', onclick: () => { box.hidden = true; } }, 'Close')),
    el('p', { class: 'muted' }, fmtTime(report.created_ms)),
    ...reportBody(report.body));
}

/* Battle and reinforcement reports of the reference game get tables; any other body is shown as JSON. */
function reportBody(body) {
  if (body.battle) {
    const b = body.battle;
    const units = [...new Set([...Object.keys(b.attackers), ...Object.keys(b.defenders)])];
    const cell = (obj, u) => el('td', {}, String(obj[u] ?? 0));
    const loot = Object.entries(body.loot ?? {}).map(([r, n]) => `${n} ${r}`).join(', ');
    return [
      el('p', {}, `${place(body.attacker)} ${b.kind === 'raid' ? 'raided' : 'attacked'} ${place(body.defender)}: `,
        el('strong', {}, body.outcome === 'victory' ? 'victory' : 'defeat'), '.'),
      el('div', { class: 'scroll' }, el('table', { class: 'list' },
        el('tr', {}, el('th', {}, 'Unit'), el('th', {}, 'Attackers'), el('th', {}, 'lost'),
          el('th', {}, 'Defenders'), el('th', {}, 'lost')),
        units.map((u) => el('tr', {}, el('th', { scope: 'row' }, label(u)),
          cell(b.attackers, u), cell(b.attacker_losses, u), cell(b.defenders, u), cell(b.defender_losses, u))))),
      el('p', {}, `Attack ${b.attack_power} against defense ${b.defense_power}, wall level ${b.wall_level}. Loot: ${loot || 'none'}.`),
    ];
  }
  if (body.troops && body.sender) {
    return [el('p', {}, `${troopText(body.troops)} from ${place(body.sender)} arrived at ${place(body.receiver)}.`)];
  }
  return [el('pre', {}, JSON.stringify(body, (k, v) => (typeof v === 'bigint' ? String(v) : v), 2))];
}

/* ---- messages, session, forms ------------------------------------------------ */

/* An error shown next to the field it is about (``#<id>-error``). */
function fieldError(id, text) {
  const node = $(`#${id}-error`);
  if (!node) return false;
  setText(node, text);
  node.hidden = false;
  return true;
}

/* A new action clears the errors of the last one, in the forms and at the top. */
function clearErrors() {
  for (const node of document.querySelectorAll('.field-error')) node.hidden = true;
  if (!$('#message').classList.contains('ok')) hideMessage();
}

function showMessage(text, kind = 'error') {
  const box = $('#message');
  box.className = `message ${kind}`;
  box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  setText($('#message-text'), text);
  box.hidden = false;
  clearTimeout(state.msgTimer);
  if (kind === 'ok') state.msgTimer = setTimeout(hideMessage, 4000);
}

function hideMessage() {
  $('#message').hidden = true;
}

/* A pushed alert of the game (refgame/commands.py send_march: incoming_attack). */
function onAlert({ kind, data }) {
  if (kind !== 'incoming_attack' || !data) return;
  const target = state.snap?.villages.find((v) => String(v.id) === String(data.target_village_id));
  state.incoming.fromPush(data, target?.name);
  state.incoming.tick(serverNow());
}

/* For .catch(): show the API's message, answer null. */
function failed(error) {
  showMessage(error.message);
  return null;
}

/* The game shows up with the first snapshot; the login form when logged out. */
function showGame(on) {
  $('#auth').hidden = on;
  $('#game').hidden = $('#who').hidden = !on;
}

async function loggedIn() {
  Object.assign(state, { loggedIn: true, snap: null, villageId: null, lastUnread: null, reportsPage: 1, unitsKey: '' });
  $('#auth').hidden = $('#report-detail').hidden = true;
  await game.clock.sync();
  poller.start(); // a new session: no ETag, a stale answer of the old one is dropped
}

function loggedOut(message) {
  Object.assign(state, { loggedIn: false, snap: null });
  poller.stop();
  state.incoming.clear();
  showGame(false);
  setText($('#clock'), '');
  if (message) showMessage(message);
}

async function onAuthSubmit(event) {
  event.preventDefault();
  const register = event.submitter?.value === 'register';
  const name = $('#auth-name').value.trim();
  const password = $('#auth-password').value;
  const buttons = event.target.querySelectorAll('button');
  buttons.forEach((b) => { b.disabled = true; });
  try {
    await (register ? game.register(name, password) : game.login(name, password)); // sets the cookie
    $('#auth-password').value = '';
    hideMessage();
    await loggedIn();
  } catch (error) {
    showMessage(error.message);
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

function onTrain(event) {
  event.preventDefault();
  const v = village();
  const unit = $('#train-unit').value;
  const count = Number($('#train-count').value);
  const max = state.rules?.max_train_per_order ?? 10000;
  if (!Number.isInteger(count) || count < 1 || count > max) {
    clearErrors();
    fieldError('train-count', `Train 1 to ${max} at a time.`);
    return;
  }
  // a refusal shows next to the form; its message says what is missing
  const beside = (error) => fieldError('train-count', error.message);
  if (v) command('train', { village_id: v.id, unit, count }, `Training ${count} × ${label(unit)}.`, event.submitter, beside);
}

async function onMarch(event) {
  event.preventDefault();
  const v = village();
  if (!v) return;
  clearErrors();
  const { troops, x, y } = marchInput();
  let bad = false;
  for (const [u, n] of Object.entries(troops)) {
    const home = v.troops[u] ?? 0;
    if (n > home) bad = fieldError(`march-${u}`, `Only ${home} at home.`);
  }
  if (x === null || y === null) bad = fieldError('march-target', 'Choose the target: x and y, or click a village on the map.');
  if (!Object.keys(troops).length) bad = fieldError('march-troops', 'Choose how many troops to send.');
  if (bad) return;
  const kind = $('#march-kind').value;
  const body = { village_id: v.id, kind, x, y, troops };
  const beside = (error) => {
    if (error.code === 'insufficient_troops' && error.details?.available) {
      for (const [u, n] of Object.entries(error.details.available)) fieldError(`march-${u}`, `Only ${n} at home.`);
      return true;
    }
    return error.code === 'invalid_march' && fieldError('march-target', error.message);
  };
  if (await command('march', body, `${label(kind)} sent.`, event.submitter, beside)) {
    document.querySelectorAll('#march-troops input').forEach((input) => { input.value = 0; });
    renderMarchPreview(v);
  }
}

function start() {
  $('#auth-form').addEventListener('submit', onAuthSubmit);
  $('#train-form').addEventListener('submit', onTrain);
  $('#march-form').addEventListener('submit', onMarch);
  const redrawForms = () => { const v = village(); if (v) { renderTrainInfo(v); renderMarchPreview(v); } };
  for (const id of ['#train-form', '#march-form']) {
    $(id).addEventListener('input', redrawForms);
    $(id).addEventListener('change', redrawForms);
  }
  $('#map-refresh').addEventListener('click', refreshMap);
  initMap({
    query: api,
    snapshot: () => state.snap,
    ownVillage: village,
    rules: () => state.rules,
    chosenTroops: () => marchInput().troops,
    onTarget: targetVillage,
  });
  $('#message-close').addEventListener('click', hideMessage);
  state.incoming = new IncomingAlert($('#alert-banner'));
  state.rankings = new RankingsPanel($('#rankings-panel'), api);
  $('#alert-close').addEventListener('click', () => state.incoming.dismiss());
  $('#logout').addEventListener('click', async () => {
    await game.logout().catch(() => null); // unreachable? the page logs out all the same
    loggedOut(null);
  });
  $('#village-select').addEventListener('change', (event) => {
    state.villageId = event.target.value;
    render();
    centreOnVillage();
  });
  // 401: the session expired or was revoked (at start-up: there was none, say nothing)
  game.addEventListener('unauthorized', () => {
    if (state.loggedIn) loggedOut(state.snap ? 'Your session has ended; log in again.' : null);
  });
  poller.addEventListener('snapshot', (event) => applySnapshot(event.detail));
  poller.addEventListener('error', (event) => {
    if (!state.loggedIn) return;
    showMessage(event.detail.status ? event.detail.message : 'The server cannot be reached; retrying.');
    state.pollFailed = true;
  });
  poller.addEventListener('poll', (event) => {
    if (event.detail.ok && state.pollFailed) hideMessage();
    if (event.detail.ok) state.pollFailed = false;
  });
  poller.addEventListener('alert', (event) => onAlert(event.detail));
  poller.addEventListener('push', (event) => { $('#live').hidden = !event.detail.open; });
  requestAnimationFrame(frame);
  // The session cookie is HttpOnly, so the page cannot see it: a first poll
  // tells whether we are logged in (snapshot) or not (401 → the login form).
  // The SDK resyncs the clock and polls when a hidden tab shows again.
  state.loggedIn = true;
  game.clock.sync().then(() => poller.start());
}

start();
