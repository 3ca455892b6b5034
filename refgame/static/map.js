/* The map: a window of the world around a centre the player moves.
 *
 * Drag it (mouse or touch), press the arrow keys while it has focus, jump to
 * coordinates or go back to the village on screen. The villages of the window
 * around the viewed centre are fetched (GET /api/map) a moment after the centre
 * stops moving; a larger window than is shown is fetched, so short pans show
 * villages at once. Pointing at a village (hover, focus or tap) shows who owns it,
 * its population, its distance from the village on screen and the travel time
 * of the troops chosen in the march form; "Send troops here" makes it the target.
 */

const VIEW_RADIUS = 4; // (2r+1)² cells on screen (style.css: .map's columns)
const FETCH_RADIUS = 6; // fetched around the centre (at most the server's 15)
const FETCH_DELAY_MS = 250; // a pan fetches once the centre rests this long
const DRAG_PX = 6; // a pointer moved less than this is a click or tap, not a drag
const MS_PER_HOUR = 3600000;

const map = {
  opts: null,
  cx: 0,
  cy: 0,
  mapRadius: null, // the world's extent, from the first answer
  window: null, // the last answer: bounds and villages by "x,y"
  seq: 0, // answers to older requests are dropped
  timer: 0,
  pointed: null, // the village in the info box
  alliance: new Set(), // player ids (strings) of the alliance's members
  drag: null,
  dragged: false,
  drawn: '', // the cells on screen, to skip redrawing the same
};

/* Builds an element; text is added as text nodes, never as HTML (names are players'). */
function el(tag, props = {}, ...children) {
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

const clampCoord = (n) => (map.mapRadius === null ? n : Math.max(-map.mapRadius, Math.min(map.mapRadius, n)));
const fmtDuration = (ms) => {
  const s = Math.ceil(ms / 1000);
  const pad = (n) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  return h ? `${h}:${pad(Math.floor((s % 3600) / 60))}:${pad(s % 60)}` : `${Math.floor(s / 60)}:${pad(s % 60)}`;
};
const label = (name) => name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, ' ');

/* Whose a village is, for its mark: own, alliance, player, bot or abandoned. */
function kindOf(w) {
  if (w.player_id === null) return 'abandoned';
  const me = map.opts.snapshot()?.player_id;
  if (String(w.player_id) === String(me)) return 'own';
  if (map.alliance.has(String(w.player_id))) return 'alliance';
  return w.player_is_bot ? 'bot' : 'player';
}

const KIND_TEXT = { own: 'yours', alliance: 'alliance', player: 'other player', bot: 'bot', abandoned: 'abandoned' };

/* A short label that tells villages apart: a sign for yours, bots and abandoned
 * ones, the owner's first two letters for other players. */
function shortLabel(w, kind) {
  if (kind === 'own') return '★';
  if (kind === 'bot') return '⚙';
  if (kind === 'abandoned') return '·';
  return Array.from(w.player_name ?? '?').slice(0, 2).join('');
}

/* The alliance's members (player ids); their villages get the `alliance` mark. */
export function setAllianceMembers(playerIds) {
  map.alliance = new Set((Array.isArray(playerIds) ? playerIds : []).map(String));
  if (map.opts) render();
}

/* A new snapshot: the alliance (if the snapshot has one) and the own marks may have changed. */
export function mapSnapshot(snap) {
  if (snap && 'alliance' in snap) setAllianceMembers(snap.alliance?.members ?? []);
  else if (map.opts) render();
}

/* Moves the view; the window is fetched once the centre rests (at once with delay 0). */
function moveTo(x, y, delay = FETCH_DELAY_MS) {
  map.cx = clampCoord(x);
  map.cy = clampCoord(y);
  render();
  clearTimeout(map.timer);
  map.timer = setTimeout(fetchWindow, delay);
}

/* Shows the map around the village on screen (first snapshot, another village chosen). */
export function centreOnVillage() {
  const v = map.opts?.ownVillage();
  if (v) moveTo(v.x, v.y, 0);
}

/* Fetches the window around the viewed centre again, now. */
export function refreshMap() {
  if (map.opts) moveTo(map.cx, map.cy, 0);
}

async function fetchWindow() {
  const seq = ++map.seq;
  const answer = await map.opts.query('map', { x: map.cx, y: map.cy, radius: FETCH_RADIUS });
  if (!answer || seq !== map.seq) return; // failed (shown by query) or overtaken
  map.mapRadius = answer.map_radius;
  map.window = { ...answer, at: new Map(answer.villages.map((w) => [`${w.x},${w.y}`, w])) };
  if (map.pointed) map.pointed = map.window.at.get(`${map.pointed.x},${map.pointed.y}`) ?? map.pointed;
  render();
}

function known(x, y) {
  const w = map.window;
  return w && x >= w.min_x && x <= w.max_x && y >= w.min_y && y <= w.max_y;
}

/* What each cell of the view shows, north (larger y) at the top. */
function cellSpecs() {
  const v = map.opts.ownVillage();
  const specs = [];
  for (let y = map.cy + VIEW_RADIUS; y >= map.cy - VIEW_RADIUS; y--) {
    for (let x = map.cx - VIEW_RADIUS; x <= map.cx + VIEW_RADIUS; x++) {
      const off = map.mapRadius !== null && (Math.abs(x) > map.mapRadius || Math.abs(y) > map.mapRadius);
      const w = !off && known(x, y) ? map.window.at.get(`${x},${y}`) ?? null : null;
      const empty = off ? 'off' : known(x, y) ? '' : 'unknown';
      specs.push({ x, y, w, kind: w ? kindOf(w) : empty, here: Boolean(w && v && x === v.x && y === v.y) });
    }
  }
  return specs;
}

function cellNode({ x, y, w, kind, here }) {
  if (!w) {
    return el('div', { class: kind ? `cell ${kind}` : 'cell', title: kind === 'off' ? 'off the map' : `(${x}|${y})` });
  }
  return el('button', {
    type: 'button', class: `cell village ${kind}${here ? ' here' : ''}`,
    'aria-label': `${w.name} (${x}|${y}), ${w.player_name ?? 'no owner'}: ${KIND_TEXT[kind]}`, dataset: { x, y, kind },
    onpointerenter: () => point(w),
    onfocus: () => point(w),
    onclick: () => { point(w); map.opts.onTarget(w, false); },
  }, shortLabel(w, kind));
}

function render() {
  const grid = document.querySelector('#map');
  if (!grid) return;
  const specs = cellSpecs();
  // unchanged cells stay (a snapshot redraws often): a click in progress is not lost
  const drawn = JSON.stringify(specs);
  if (drawn !== map.drawn) {
    map.drawn = drawn;
    const focused = grid.contains(document.activeElement) && document.activeElement !== grid
      ? document.activeElement.dataset : null;
    grid.replaceChildren(...specs.map(cellNode));
    if (focused) { // keyboard panning from a village keeps the focus in the map
      const again = grid.querySelector(`[data-x="${focused.x}"][data-y="${focused.y}"]`);
      (again || grid).focus({ preventScroll: true });
    }
  }
  const centre = document.querySelector('#map-centre');
  if (centre) centre.textContent = `centre (${map.cx}|${map.cy})`;
  renderInfo();
}

function point(w) {
  map.pointed = w;
  renderInfo();
}

/* The travel time of the slowest troops chosen in the march form, or null. */
function travelText(distance) {
  const rules = map.opts.rules();
  const troops = map.opts.chosenTroops();
  const units = Object.keys(troops).filter((u) => troops[u] > 0 && rules?.units[u]);
  if (!rules || !units.length || distance === 0) return null;
  const slowest = units.reduce((a, b) => (rules.units[a].speed <= rules.units[b].speed ? a : b));
  const ms = Math.max(1, Math.ceil((distance * MS_PER_HOUR) / (rules.units[slowest].speed * rules.world_speed)));
  return `${fmtDuration(ms)} for the chosen troops (slowest: ${label(slowest)})`;
}

function renderInfo() {
  const box = document.querySelector('#map-info');
  if (!box) return;
  const w = map.pointed;
  if (!w) {
    box.hidden = true;
    return;
  }
  const kind = kindOf(w);
  const v = map.opts.ownVillage();
  const distance = v ? Math.hypot(w.x - v.x, w.y - v.y) : null;
  const owner = w.player_name === null ? 'no owner'
    : `${w.player_name}${kind === 'own' ? ' (you)' : kind === 'bot' ? ' (bot)' : kind === 'alliance' ? ' (alliance)' : ''}`;
  const travel = distance === null ? null : travelText(distance);
  const isHere = v && w.x === v.x && w.y === v.y;
  // only the text is rebuilt: the button stays, so a click that starts as the box
  // changes (a troop count's change event on the way) still lands
  box.querySelector('.map-info-text').replaceChildren(
    el('div', { class: 'map-info-name' }, el('strong', {}, w.name), ` (${w.x}|${w.y})`),
    el('div', { class: 'map-info-owner' }, `Owner: ${owner}`),
    w.size === null ? null : el('div', { class: 'map-info-size' }, `Population: ${w.size}`),
    distance === null ? null
      : el('div', { class: 'map-info-distance' }, isHere ? 'The village on screen'
        : `Distance: ${distance.toFixed(1)} fields from ${v.name}`),
    travel && el('div', { class: 'map-info-travel' }, `Travel: ${travel}`),
  );
  box.querySelector('#map-send-here').hidden = Boolean(isHere);
  box.dataset.kind = kind;
  box.hidden = false;
}

/* "Jump to (x|y)": whole numbers inside the map, else an error beside the fields. */
function onJump(event) {
  event.preventDefault();
  const error = document.querySelector('#map-jump-error');
  const read = (id) => {
    const text = document.querySelector(id).value.trim();
    return /^-?\d{1,5}$/.test(text) ? Number(text) : null;
  };
  const x = read('#map-jump-x');
  const y = read('#map-jump-y');
  const r = map.mapRadius;
  let problem = null;
  if (x === null || y === null) problem = 'Give x and y as whole numbers.';
  else if (r !== null && (Math.abs(x) > r || Math.abs(y) > r)) problem = `x and y must be within -${r}..${r}.`;
  error.hidden = problem === null;
  error.textContent = problem ?? '';
  document.querySelector('#map-jump-x').setAttribute('aria-invalid', problem ? 'true' : 'false');
  document.querySelector('#map-jump-y').setAttribute('aria-invalid', problem ? 'true' : 'false');
  if (!problem) moveTo(x, y, 0);
}

const KEYS = { ArrowUp: [0, 1], ArrowDown: [0, -1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] };

function onKey(event) {
  map.dragged = false; // no drag to end: a key's click (Enter) is a click
  const step = KEYS[event.key];
  if (!step || event.altKey || event.ctrlKey || event.metaKey) return;
  event.preventDefault(); // the page does not scroll while the map pans
  const n = event.shiftKey ? VIEW_RADIUS : 1;
  moveTo(map.cx + step[0] * n, map.cy + step[1] * n);
}

/* Dragging by whole cells: the content follows the pointer (drag down → see the north). */
function onPointerDown(event) {
  if (event.button !== 0) return;
  map.drag = { id: event.pointerId, px: event.clientX, py: event.clientY, cx: map.cx, cy: map.cy };
  map.dragged = false;
}

function onPointerMove(event) {
  const d = map.drag;
  if (!d || d.id !== event.pointerId) return;
  const dx = event.clientX - d.px;
  const dy = event.clientY - d.py;
  const grid = event.currentTarget;
  if (!map.dragged) {
    if (Math.hypot(dx, dy) < DRAG_PX) return;
    map.dragged = true;
    grid.setPointerCapture(event.pointerId); // keep the drag when the pointer leaves the map
    grid.classList.add('dragging');
  }
  const cell = grid.clientWidth / (2 * VIEW_RADIUS + 1);
  const x = clampCoord(d.cx - Math.round(dx / cell));
  const y = clampCoord(d.cy + Math.round(dy / cell));
  if (x !== map.cx || y !== map.cy) moveTo(x, y);
}

function onPointerEnd(event) {
  if (!map.drag || map.drag.id !== event.pointerId) return;
  map.drag = null;
  event.currentTarget.classList.remove('dragging');
}

function legend() {
  const item = (kind, sign, text) => el('li', {}, el('span', { class: `cell village ${kind}`, 'aria-hidden': 'true' }, sign), ` ${text}`);
  return el('ul', { class: 'map-legend', 'aria-label': 'Map legend' },
    item('own', '★', 'yours'), item('alliance', 'Al', 'alliance'), item('player', 'Pl', 'other players'),
    item('bot', '⚙', 'bots'), item('abandoned', '·', 'abandoned'));
}

/* Builds the map's controls around #map. ``opts``: query(path, params) → answer or null,
 * snapshot(), ownVillage() (the village on screen), rules(), chosenTroops() (unit → count),
 * onTarget(village, focus) (fills the march form; focus: and moves to it). */
export function initMap(opts) {
  map.opts = opts;
  const grid = document.querySelector('#map');
  grid.tabIndex = 0;
  grid.setAttribute('aria-label', 'Map: drag or use the arrow keys to move it');
  grid.addEventListener('keydown', onKey);
  grid.addEventListener('pointerdown', onPointerDown);
  grid.addEventListener('pointermove', onPointerMove);
  grid.addEventListener('pointerup', onPointerEnd);
  grid.addEventListener('pointercancel', onPointerEnd);
  grid.addEventListener('click', (event) => { // a drag ends without a click on a village
    if (map.dragged) { event.stopPropagation(); event.preventDefault(); map.dragged = false; }
  }, true);
  const controls = el('div', { class: 'map-controls' },
    el('form', { id: 'map-jump', class: 'row', novalidate: true, onsubmit: onJump },
      el('label', { for: 'map-jump-x' }, 'x'),
      el('input', { id: 'map-jump-x', class: 'coord', inputmode: 'numeric', autocomplete: 'off', 'aria-describedby': 'map-jump-error' }),
      el('label', { for: 'map-jump-y' }, 'y'),
      el('input', { id: 'map-jump-y', class: 'coord', inputmode: 'numeric', autocomplete: 'off', 'aria-describedby': 'map-jump-error' }),
      el('button', { type: 'submit', class: 'small' }, 'Jump'),
      el('button', { type: 'button', class: 'small secondary', id: 'map-home', onclick: centreOnVillage }, 'Back to my village')),
    el('span', { class: 'field-error', id: 'map-jump-error', role: 'alert', hidden: true }),
    el('span', { id: 'map-centre', class: 'muted small-text', 'aria-live': 'polite' }));
  grid.before(controls);
  // the travel time in the box follows the troops chosen in the march form
  for (const type of ['input', 'change']) document.querySelector('#march-form')?.addEventListener(type, renderInfo);
  const send = () => { if (map.pointed) map.opts.onTarget(map.pointed, true); };
  grid.after(el('div', { id: 'map-info', class: 'map-info', hidden: true },
    el('div', { class: 'map-info-text', 'aria-live': 'polite' }),
    el('button', { type: 'button', id: 'map-send-here', onclick: send }, 'Send troops here')), legend());
}
