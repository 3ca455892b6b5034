/* Founding a second village (refgame/settling.py): the form with its travel time, the
 * settlers on their way, and a click on a free map field to aim there. A module of its own
 * beside app.js, which shows the rest of the village and keeps the snapshot. */
import {
  command, el, fmtDuration, poller, serverNow, setText, state, village,
} from '/static/app.js';

const SETTLER = 'settler'; // refgame/units.py
const MS_PER_HOUR = 3600000;
const $ = (selector) => document.querySelector(selector);

const needed = () => state.rules?.settlers_to_found ?? 3;

function target() {
  const x = $('#found-x').value === '' ? null : Number($('#found-x').value);
  const y = $('#found-y').value === '' ? null : Number($('#found-y').value);
  return { x, y };
}

/* The settlers' travel time from ``v`` (refgame/travel.py: straight-line distance at the
 * settler's speed × the world speed), or null before the rules or a target. */
function travel(v) {
  const { x, y } = target();
  const spec = state.rules?.units[SETTLER];
  if (!spec || x === null || y === null || (x === v.x && y === v.y)) return null;
  const distance = Math.hypot(x - v.x, y - v.y);
  return { distance, ms: Math.max(1, Math.ceil((distance * MS_PER_HOUR) / (spec.speed * state.rules.world_speed))) };
}

function showError(text) {
  const node = $('#found-error');
  setText(node, text);
  node.hidden = !text;
}

function renderPreview(v, now) {
  const t = travel(v);
  setText($('#found-preview'), t
    ? `${t.distance.toFixed(1)} fields: travel ${fmtDuration(t.ms)}, arrives ${new Date(now + t.ms).toLocaleTimeString()} server time.`
    : 'Choose a free field (x and y, or click an empty map field) to see the travel time.');
}

function render() {
  const v = village();
  if (!v) return;
  const home = v.troops[SETTLER] ?? 0;
  const spec = state.rules?.units[SETTLER];
  const residence = v.buildings.residence ?? 0;
  const train = spec && residence < spec.barracks_level
    ? ` Settlers train in the residence from level ${spec.barracks_level} (this village has ${residence}).` : '';
  setText($('#found-home'), `${home} of ${needed()} settlers at home.${train}`);
  $('#found-send').disabled = home < needed();
  renderPreview(v, serverNow());
  const out = v.settlers_out ?? [];
  $('#settlers-out').replaceChildren(...(out.length ? out.map((s) =>
    el('li', { dataset: { settle: s.id } }, `${s.settlers} settlers → (${s.x}|${s.y}) `,
      el('span', { class: 'countdown', dataset: { due: s.arrive_ms, doneText: 'arriving' } })))
    : [el('li', { class: 'muted' }, 'No settlers on the way.')]));
}

async function onFound(event) {
  event.preventDefault();
  const v = village();
  if (!v) return;
  const { x, y } = target();
  const radius = state.rules?.map_radius;
  showError('');
  if (!Number.isInteger(x) || !Number.isInteger(y)) {
    showError('Choose the field: x and y, or click an empty map field.');
    return;
  }
  if (radius != null && (Math.abs(x) > radius || Math.abs(y) > radius)) {
    showError(`The map spans -${radius}..${radius}.`);
    return;
  }
  const beside = (error) => { showError(error.message); return true; };
  const ok = await command('found', { village_id: v.id, x, y }, `The settlers set out for (${x}|${y}).`,
    event.submitter, beside);
  if (ok) { $('#found-x').value = ''; $('#found-y').value = ''; }
}

/* A click on an empty field of the map (its title is "(x|y)") aims the settlers there. */
function onMapClick(event) {
  const cell = event.target.closest('.cell');
  const xy = cell && !cell.matches('.village, .off, .unknown') && /^\((-?\d+)\|(-?\d+)\)$/.exec(cell.title);
  if (!xy) return;
  $('#found-x').value = xy[1];
  $('#found-y').value = xy[2];
  const v = village();
  if (v) renderPreview(v, serverNow());
}

function start() {
  $('#found-form').addEventListener('submit', onFound);
  $('#found-form').addEventListener('input', () => { const v = village(); if (v) renderPreview(v, serverNow()); });
  $('#map').addEventListener('click', onMapClick);
  $('#village-select').addEventListener('change', render); // app.js switched the village first
  poller.addEventListener('snapshot', render); // after app.js took the snapshot in
  // the arrival clock moves with the server's clock until the settlers are sent
  setInterval(() => { const v = state.snap && village(); if (v) renderPreview(v, serverNow()); }, 1000);
}

start();
