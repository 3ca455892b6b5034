/* The framework's generic page, for a game without a browser client of its own.
 *
 * Built only on the SDK: login or register, the snapshot as a tree (refreshed by
 * the SDK's polling), and a form for any command the API document lists (the
 * operations tagged "commands"), with a JSON body prefilled from its schema.
 */
import { ApiError, WebGame, parseJson, toJson } from '/sdk/webgame.js';

const CLOCK_MS = 1000;

const game = new WebGame();
const poller = game.poll();
const state = {
  loggedIn: false,
  snap: null,
  commands: [], // {path, summary, schema}
  schemas: {}, // the document's components.schemas
  closed: new Set(), // tree paths the player folded
  edited: false, // the player changed the body: snapshots no longer refill it
  pollFailed: false, // the message on screen is a failed poll's
};

const $ = (selector) => document.querySelector(selector);

/* Text goes in as text nodes, never as HTML: names in a snapshot are players'. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function showMessage(text, kind = 'error') {
  const box = $('#message');
  box.className = `message ${kind}`;
  box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  $('#message-text').textContent = text;
  box.hidden = false;
}

function hideMessage() {
  $('#message').hidden = true;
}

/* ---- the snapshot as a tree --------------------------------------------------- */

const isTree = (value) => value !== null && typeof value === 'object';

/* Each node carries its path (data-path="villages.0.id") so it can be found; folded
 * branches stay folded across snapshots. */
function tree(value, path) {
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  const list = el('ul');
  for (const [key, child] of entries) {
    const at = path ? `${path}.${key}` : key;
    if (isTree(child)) {
      const size = Array.isArray(child) ? `[${child.length}]` : `{${Object.keys(child).length}}`;
      const details = el('details', { dataset: { path: at } },
        el('summary', {}, el('span', { class: 'key' }, key), ' ', el('span', { class: 'muted' }, size)),
        tree(child, at));
      details.open = !state.closed.has(at);
      details.addEventListener('toggle', () => {
        if (details.open) state.closed.delete(at);
        else state.closed.add(at);
      });
      list.append(el('li', {}, details));
    } else {
      const text = typeof child === 'string' ? JSON.stringify(child) : String(child);
      list.append(el('li', { dataset: { path: at } },
        el('span', { class: 'key' }, key), ': ',
        el('span', { class: `value ${child === null ? 'null' : typeof child}` }, text)));
    }
  }
  return list;
}

function applySnapshot(snap) {
  state.snap = snap;
  showGame(true);
  $('#player-name').textContent = snap.name ?? '';
  $('#snapshot').replaceChildren(isTree(snap) ? tree(snap, '') : el('p', {}, String(snap)));
  if (!state.edited) fillBody(); // the first snapshot brings ids to prefill
}

/* ---- commands from the API document ------------------------------------------ */

async function loadCommands() {
  const doc = await game.query('openapi.json');
  state.schemas = doc.components?.schemas ?? {};
  state.commands = [];
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    const op = operations.post;
    if (!op || !(op.tags ?? []).includes('commands')) continue;
    const schema = op.requestBody?.content?.['application/json']?.schema ?? { type: 'object' };
    state.commands.push({ path: path.replace(/^\/api\//, ''), summary: op.summary ?? '', schema });
  }
  state.commands.sort((a, b) => a.path.localeCompare(b.path));
  const select = $('#command');
  select.replaceChildren(...state.commands.map((c) => el('option', { value: c.path }, c.path)));
  $('#command-send').disabled = !state.commands.length;
  if (!state.commands.length) $('#command-summary').textContent = 'This game has no commands yet.';
  fillBody();
}

const resolve = (schema) => {
  const ref = schema?.$ref?.match(/^#\/components\/schemas\/(.+)$/);
  return ref ? resolve(state.schemas[ref[1]]) : (schema ?? {});
};

/* A first guess at "<thing>_id": the id of the first item of the snapshot's "<thing>s". */
function idFromSnapshot(name) {
  const match = name.match(/^(\w+)_id$/);
  const list = match && state.snap?.[`${match[1]}s`];
  return Array.isArray(list) && list[0]?.id !== undefined ? list[0].id : undefined;
}

/* A body that the schema accepts as far as it can be guessed: the player edits it. */
function example(schema, name = '') {
  const s = resolve(schema);
  if ('default' in s) return s.default;
  if ('const' in s) return s.const;
  if (s.enum) return s.enum[0];
  const options = s.anyOf ?? s.oneOf;
  if (options) return example(options.find((o) => resolve(o).type !== 'null') ?? options[0], name);
  switch (s.type) {
    case 'object': {
      const body = {};
      for (const [key, prop] of Object.entries(s.properties ?? {})) body[key] = example(prop, key);
      return body;
    }
    case 'array':
      return [];
    case 'integer':
    case 'number':
      return idFromSnapshot(name) ?? s.minimum ?? (s.exclusiveMinimum ?? -1) + 1;
    case 'boolean':
      return false;
    case 'string':
      return '';
    default:
      return null;
  }
}

function selected() {
  return state.commands.find((c) => c.path === $('#command').value) ?? null;
}

function fillBody() {
  const command = selected();
  $('#command-summary').textContent = command?.summary ?? '';
  if (command) $('#command-body').value = toJson(example(command.schema), 2);
  state.edited = false;
}

async function onCommand(event) {
  event.preventDefault();
  const command = selected();
  if (!command) return;
  const answer = $('#command-answer');
  let body;
  try {
    body = parseJson($('#command-body').value);
  } catch (error) {
    answer.className = 'answer error';
    answer.textContent = `The body is not valid JSON: ${error.message}`;
    return;
  }
  const button = $('#command-send');
  button.disabled = true;
  try {
    const result = await game.command(command.path, body);
    answer.className = 'answer ok';
    answer.textContent = toJson(result, 2);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    answer.className = 'answer error';
    answer.textContent = `${error.status} ${error.code}: ${error.message}`
      + (error.details ? `\n${toJson(error.details, 2)}` : '');
  } finally {
    button.disabled = false;
  }
}

/* ---- session ----------------------------------------------------------------------- */

function showGame(on) {
  $('#auth').hidden = on;
  $('#game').hidden = $('#who').hidden = !on;
}

async function loggedIn() {
  state.loggedIn = true;
  state.snap = null;
  await game.clock.sync();
  poller.start();
}

function loggedOut(message) {
  state.loggedIn = false;
  state.snap = null;
  poller.stop();
  showGame(false);
  $('#clock').textContent = '';
  $('#snapshot').replaceChildren();
  if (message) showMessage(message);
}

async function onAuthSubmit(event) {
  event.preventDefault();
  const register = event.submitter?.value === 'register';
  const name = $('#auth-name').value.trim();
  const password = $('#auth-password').value;
  try {
    await (register ? game.register(name, password) : game.login(name, password));
    $('#auth-password').value = '';
    hideMessage();
    await loggedIn();
  } catch (error) {
    showMessage(error.message);
  }
}

function start() {
  $('#auth-form').addEventListener('submit', onAuthSubmit);
  $('#command-form').addEventListener('submit', onCommand);
  $('#command').addEventListener('change', fillBody);
  $('#command-body').addEventListener('input', () => { state.edited = true; });
  $('#message-close').addEventListener('click', hideMessage);
  $('#logout').addEventListener('click', async () => {
    await game.logout().catch(() => null);
    loggedOut(null);
  });
  game.addEventListener('unauthorized', () => {
    if (state.loggedIn) loggedOut(state.snap ? 'Your session has ended; log in again.' : null);
  });
  poller.addEventListener('snapshot', (event) => applySnapshot(event.detail));
  poller.addEventListener('error', (event) => {
    showMessage(event.detail.message);
    state.pollFailed = true;
  });
  poller.addEventListener('poll', (event) => {
    if (event.detail.ok && state.pollFailed) hideMessage();
    if (event.detail.ok) state.pollFailed = false;
  });
  setInterval(() => {
    if (state.snap) $('#clock').textContent = new Date(game.clock.now()).toLocaleTimeString();
  }, CLOCK_MS);
  loadCommands().catch((error) => showMessage(`The API document could not be read: ${error.message}`));
  // The HttpOnly session cookie is invisible here: a first poll tells (401 → the login form).
  state.loggedIn = true;
  game.clock.sync().then(() => poller.start());
}

start();
