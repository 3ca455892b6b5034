/* The space game's page, on the framework's browser SDK (/sdk/webgame.js): login,
 * clock sync, snapshot polling and commands with idempotency keys come from there;
 * this file only draws a planet and sends the game's commands (POST /api/sg/...). */
import { ApiError, WebGame } from '/sdk/webgame.js';

const MS_PER_HOUR = 3_600_000;
const RESOURCES = ['metal', 'crystal', 'deuterium'];
const BUILDINGS = ['metal_mine', 'crystal_mine', 'deuterium_synthesizer', 'metal_storage',
  'crystal_storage', 'deuterium_tank', 'robotics_factory', 'shipyard', 'research_lab'];
const RESEARCH = ['combustion_drive', 'weapons_tech', 'shielding_tech', 'armour_tech'];
const SHIPS = ['small_cargo', 'light_fighter', 'heavy_fighter', 'cruiser'];

const game = new WebGame();
const poller = game.poll();
const state = { snap: null, reportsSeen: null };
const $ = (selector) => document.querySelector(selector);

/* Text goes in as text nodes, never as HTML: names come from other players. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function say(text, kind = 'error') {
  const box = $('#message');
  box.className = `message ${kind}`;
  box.textContent = text;
  box.hidden = false;
}

const planet = () => state.snap?.villages?.[0] ?? null;
const label = (name) => name.replaceAll('_', ' ');

/* The stock now: the server's rule, min(cap, amount + rate × elapsed), rounded down. */
function stockNow(v, res, now) {
  const stocks = v.resources ?? v.stocks;
  const r = stocks[res];
  const amount = r.amount ?? r.units;
  const since = stocks.updated_ms ?? state.snap.server_time_ms ?? now;
  const grown = amount + (r.rate_per_hour * Math.max(0, now - since)) / MS_PER_HOUR;
  return Math.floor(Math.min(r.cap, grown));
}

async function command(path, body, done) {
  try {
    await game.command(path, body);
    say(done, 'ok');
  } catch (error) {
    say(error instanceof ApiError ? `${error.code}: ${error.message}` : String(error));
  }
}

function row(...cells) {
  return el('tr', {}, ...cells.map((c) => (c instanceof Node ? el('td', {}, c) : el('td', { class: 'num' }, String(c)))));
}

function render() {
  const v = planet();
  if (!v) return;
  $('#player-name').textContent = state.snap.name ?? '';
  $('#planet-title').textContent = `${v.name} (${v.x}|${v.y}) id ${v.id}, ${v.temperature ?? '?'} °C`;
  renderResources();
  const busy = (queue) => (v.orders ?? []).some((o) => o.queue === queue);
  $('#buildings').replaceChildren(...BUILDINGS.map((b) => row(el('span', {}, label(b)), v.buildings?.[b] ?? 0,
    el('button', { type: 'button', 'data-building': b, disabled: busy('build') ? '' : null,
      onclick: () => command('sg/build', { planet_id: v.id, building: b }, `${label(b)} ordered`) }, 'Upgrade'))));
  $('#research').replaceChildren(...RESEARCH.map((t) => row(el('span', {}, label(t)), state.snap.research?.[t] ?? 0,
    el('button', { type: 'button', 'data-research': t, disabled: busy('research') ? '' : null,
      onclick: () => command('sg/research', { planet_id: v.id, research: t }, `${label(t)} ordered`) }, 'Research'))));
  $('#ships').replaceChildren(...SHIPS.map((s) => row(el('span', {}, label(s)), v.ships?.[s] ?? 0)));
  $('#orders').replaceChildren(...(v.orders ?? []).map((o) =>
    el('li', {}, `${o.queue}: ${label(o.item)} ${o.amount}, done ${new Date(o.done_ms).toLocaleTimeString()}`)));
  $('#fleets').replaceChildren(...(v.fleets ?? []).map((f) => el('li', {},
    `#${f.id} ${f.mission} → ${f.target_id} (${f.state}), ${new Date(f.arrive_ms).toLocaleTimeString()} `,
    f.state === 'out'
      ? el('button', { type: 'button', onclick: () => command('sg/fleet/recall', { fleet_id: f.id }, 'fleet recalled') }, 'Recall')
      : '')));
  $('#incoming').replaceChildren(...(v.incoming ?? []).map((f) =>
    el('li', {}, `${f.mission} from ${f.origin_id}, ${new Date(f.arrive_ms).toLocaleTimeString()}`)));
}

function renderResources() {
  const v = planet();
  if (!v) return;
  const now = game.clock.now();
  const stocks = v.resources ?? v.stocks;
  $('#resources').replaceChildren(...RESOURCES.map((r) => el('tr', {},
    el('th', {}, r),
    el('td', { class: 'num', id: `res-${r}` }, String(stockNow(v, r, now))),
    el('td', { class: 'num muted' }, `/ ${stocks[r].cap}`),
    el('td', { class: 'num muted' }, `+${stocks[r].rate_per_hour}/h`))));
  $('#clock').textContent = new Date(now).toLocaleTimeString();
}

async function loadReports() {
  try {
    const { reports } = await game.query('sg/reports', { limit: 10 });
    $('#reports').replaceChildren(...reports.map((r) => el('li', { class: `report ${r.kind}` },
      r.kind === 'battle'
        ? `battle at ${r.body.target_id}: ${r.body.winner} won in ${r.body.rounds} rounds, loot ${RESOURCES.map((x) => r.body.loot[x]).join('/')}`
        : `${r.kind} to ${r.body.target_id}`)));
  } catch (error) {
    if (error.status !== 401) say(`reports: ${error.message}`);
  }
}

function shipFields() {
  $('#ship-kind').replaceChildren(...SHIPS.map((s) => el('option', { value: s }, label(s))));
  $('#fleet-ships').replaceChildren(...SHIPS.map((s) => el('div', { class: 'row' },
    el('label', { for: `fleet-${s}` }, label(s)),
    el('input', { id: `fleet-${s}`, name: s, type: 'number', min: '0', value: '0' }))));
}

function showGame(on) {
  $('#game').hidden = !on;
  $('#who').hidden = !on;
  $('#auth').hidden = on;
}

$('#auth-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const name = $('#auth-name').value;
  const password = $('#auth-password').value;
  try {
    if (event.submitter?.value === 'register') await game.register(name, password);
    else await game.login(name, password);
    $('#message').hidden = true;
    poller.start();
  } catch (error) {
    say(`${error.code}: ${error.message}`);
  }
});

$('#logout').addEventListener('click', async () => {
  await game.logout();
  state.snap = null;
  showGame(false);
});

$('#shipyard-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const v = planet();
  command('sg/shipyard', { planet_id: v.id, ship: $('#ship-kind').value, count: Number($('#ship-count').value) },
    'ships ordered');
});

$('#fleet-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const ships = Object.fromEntries(SHIPS.map((s) => [s, Number($(`#fleet-${s}`).value) || 0]));
  command('sg/fleet/send', { planet_id: planet().id, target_id: Number($('#fleet-target').value),
    mission: $('#fleet-mission').value, ships }, 'fleet sent');
});

game.addEventListener('unauthorized', () => { poller.stop(); showGame(false); });
poller.addEventListener('snapshot', (event) => {
  state.snap = event.detail;
  showGame(true);
  render();
  loadReports();
});

shipFields();
setInterval(renderResources, 1000);
game.clock.sync();
poller.start(); // a live session cookie shows the game at once; none: the login form
