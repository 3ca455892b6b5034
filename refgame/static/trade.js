/* The Marketplace panel: merchants free/total, a send form that shows the merchants it
 * takes, the travel time and the arrival before sending, and the trades on the way.
 *
 * It builds its own card in the page's grid and listens to the same snapshots as app.js
 * (which renders first: the village on screen is the one #village-select names). The
 * countdowns are app.js's ([data-due] nodes): they tick and poll when they end.
 */
import { game, poller } from '/static/app.js';

const RESOURCES = ['wood', 'clay', 'iron', 'crop'];
const MS_PER_HOUR = 3600000;
// refgame/trade.py, until POST /api/rules answers (it says the world speed too)
const DEFAULTS = { merchant_capacity: 500, merchant_speed: 16, merchants_per_level: 1 };

const $ = (selector) => document.querySelector(selector);
let snap = null;
let rules = null; // { world_speed, trade: {...} } from POST /api/rules
let rulesAsked = false;

/* An element; text is added as text nodes only (village names are players' input). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

const place = (p) => `${p.name ?? 'abandoned village'} (${p.x}|${p.y})`;
const goods = (amounts) => RESOURCES.filter((r) => amounts[r] > 0).map((r) => `${amounts[r]} ${r}`).join(', ');

function fmtDuration(ms) {
  const s = Math.ceil(ms / 1000);
  const pad = (n) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

function panel() {
  const amount = (r) => el('label', { class: 'trade-amount' }, `${r.charAt(0).toUpperCase()}${r.slice(1)} `,
    el('input', { id: `trade-${r}`, type: 'number', min: '0', step: '1', value: '0', dataset: { res: r } }));
  return el('section', { class: 'card', id: 'marketplace', 'aria-labelledby': 'h-marketplace' },
    el('h2', { id: 'h-marketplace' }, 'Marketplace'),
    el('p', { id: 'merchants' }, ''),
    el('form', { id: 'trade-form', novalidate: true },
      el('div', { class: 'trade-amounts' }, RESOURCES.map(amount)),
      el('div', { class: 'row' },
        el('label', { for: 'trade-x' }, 'x'), el('input', { id: 'trade-x', type: 'number', class: 'coord' }),
        el('label', { for: 'trade-y' }, 'y'), el('input', { id: 'trade-y', type: 'number', class: 'coord' })),
      el('p', { id: 'trade-preview', class: 'preview small-text', 'aria-live': 'polite' }, ''),
      el('span', { id: 'trade-error', class: 'field-error', role: 'alert', hidden: true }),
      el('button', { type: 'submit', id: 'trade-send' }, 'Trade')),
    el('h3', {}, 'On the way'),
    el('ul', { id: 'trades', class: 'queue' }));
}

function village() {
  const id = $('#village-select')?.value;
  return snap?.villages.find((v) => String(v.id) === String(id)) ?? snap?.villages[0] ?? null;
}

function trade() {
  return rules?.trade ?? DEFAULTS;
}

/* What the form asks for, and what it would take: merchants, travel, arrival. */
function plan(v) {
  const amounts = {};
  for (const r of RESOURCES) amounts[r] = Math.max(0, Math.floor(Number($(`#trade-${r}`).value)) || 0);
  const total = RESOURCES.reduce((sum, r) => sum + amounts[r], 0);
  const merchants = Math.ceil(total / trade().merchant_capacity);
  const x = $('#trade-x').value === '' ? null : Number($('#trade-x').value);
  const y = $('#trade-y').value === '' ? null : Number($('#trade-y').value);
  let ms = null;
  if (rules && x !== null && y !== null && (x !== v.x || y !== v.y)) {
    const distance = Math.hypot(x - v.x, y - v.y);
    ms = Math.max(1, Math.ceil((distance * MS_PER_HOUR) / (trade().merchant_speed * rules.world_speed)));
  }
  return { amounts, total, merchants, x, y, ms };
}

function renderPreview() {
  const v = village();
  if (!v) return;
  const p = plan(v);
  const free = v.merchants_free ?? 0;
  const parts = [];
  if (p.total) parts.push(`${p.merchants} merchant${p.merchants === 1 ? '' : 's'} needed (${free} free)`);
  if (p.ms !== null) {
    const now = game.clock.now();
    parts.push(`travel ${fmtDuration(p.ms)}, arrives ${new Date(now + p.ms).toLocaleTimeString()} server time, `
      + `merchants home at ${new Date(now + 2 * p.ms).toLocaleTimeString()}`);
  }
  const text = parts.length ? `${parts.join('; ')}.` : 'Choose amounts and a target to see merchants and travel time.';
  const box = $('#trade-preview');
  if (box.textContent !== text) box.textContent = text;
  box.classList.toggle('short', p.merchants > free);
}

const due = (t) => (t.returning ? t.return_ms : t.arrive_ms);

function renderTrades(v) {
  const total = v.merchants_total ?? 0;
  $('#merchants').textContent = total
    ? `Merchants: ${v.merchants_free} of ${total} free, ${trade().merchant_capacity} units each.`
    : 'Build a marketplace to trade.';
  const here = (p) => String(p.id) === String(v.id);
  const item = (t, dir) => {
    const back = t.returning;
    const where = dir === 'in' ? `from ${place(t.origin)}` : back ? `from ${place(t.target)}` : `→ ${place(t.target)}`;
    const lost = back && RESOURCES.some((r) => t.lost[r] > 0) ? ` (lost: ${goods(t.lost)})` : '';
    return el('li', { dataset: { trade: t.id } },
      el('strong', {}, dir === 'in' ? 'Incoming' : back ? 'Returning' : 'Outgoing'), ` ${where} `,
      el('span', { class: 'muted' }, back ? `delivered ${goods(t.delivered) || 'nothing'}${lost}` : goods(t.resources)),
      el('span', { class: 'countdown', dataset: { due: back ? t.return_ms : t.arrive_ms, doneText: 'arriving' } }));
  };
  const rows = [
    ...v.trades_out.filter((t) => here(t.origin)).map((t) => [due(t), item(t, 'out')]),
    ...v.trades_in.filter((t) => here(t.target)).map((t) => [t.arrive_ms, item(t, 'in')]),
  ].sort((a, b) => a[0] - b[0]).map(([, node]) => node);
  $('#trades').replaceChildren(...(rows.length ? rows : [el('li', { class: 'muted' }, 'No merchants on the way.')]));
}

function render() {
  const v = village();
  if (!v || !$('#marketplace')) return;
  renderTrades(v);
  renderPreview();
}

function showError(text) {
  const node = $('#trade-error');
  node.textContent = text;
  node.hidden = !text;
}

async function onSend(event) {
  event.preventDefault();
  const v = village();
  if (!v) return;
  const p = plan(v);
  if (!p.total) return showError('Choose how much of what to send.');
  if (p.x === null || p.y === null) return showError('Choose the target: x and y.');
  showError('');
  const button = $('#trade-send');
  button.disabled = true;
  try {
    await game.command('send_resources', { village_id: v.id, x: p.x, y: p.y, resources: p.amounts });
    for (const r of RESOURCES) $(`#trade-${r}`).value = '0';
    renderPreview();
  } catch (error) {
    // the server's refusal says what is missing (resources, merchants, the target)
    showError(error.message);
  } finally {
    button.disabled = false;
  }
}

function start() {
  const grid = $('#game .grid');
  if (!grid) return;
  grid.append(panel());
  $('#trade-form').addEventListener('submit', onSend);
  $('#trade-form').addEventListener('input', renderPreview);
  $('#village-select').addEventListener('change', render);
  poller.addEventListener('snapshot', (event) => {
    snap = event.detail;
    if (!rules && !rulesAsked) {
      rulesAsked = true;
      game.send('POST', 'rules', { body: {} })
        .then((answer) => { rules = answer.data; render(); })
        .catch(() => { rulesAsked = false; });
    }
    render();
  });
  setInterval(renderPreview, 1000); // the arrival preview moves with the clock
}

start();
