/* The reference game's social panels: the alliance (found, invitations, members, leave)
 * and the messages (inbox with its unread badge, pages, compose to a player or the alliance).
 *
 * It shares the page's SDK objects (app.js: game, poller). The snapshot carries what
 * says a panel is stale (alliance, alliance_invitations, unread_messages), so a panel
 * reloads its list only when that changed. Everything players wrote (names, tags,
 * subjects, bodies) is put in the page as text, never as HTML.
 */
import { game, poller } from '/static/app.js';

const PAGE = 10; // messages per page (the server allows up to 50)
const BODY_MAX = 2000; // refgame/messages.py
const SUBJECT_MAX = 80;

const social = {
  allianceKey: null, // what the alliance panel was loaded for (snapshot alliance + invitations)
  unread: null, // the unread count the inbox was loaded for
  cursors: [null], // before_id of each page seen so far; the last is the page on screen
  next: null, // the next (older) page's cursor, null on the last page
  open: new Set(), // messages whose body is shown
};

const $ = (selector) => document.querySelector(selector);
const fmtTime = (ms) => new Date(ms).toLocaleString();

/* An element whose children are text nodes or elements: never HTML. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

function status(id, text, ok = false) {
  const node = $(id);
  node.textContent = text;
  node.className = `small-text ${ok ? 'ok-text' : 'error-text'}`;
  node.hidden = !text;
}

/* A command; its answer or null (the error's message shown in the panel's status line). */
async function run(path, body, where, okText, button) {
  if (button) button.disabled = true;
  try {
    const answer = await game.command(path, body);
    status(where, okText, true);
    return answer ?? {};
  } catch (error) {
    status(where, error.message);
    return null;
  } finally {
    if (button) button.disabled = false;
  }
}

async function query(path, params, where) {
  try {
    return await game.query(path, params);
  } catch (error) {
    status(where, error.message);
    return null;
  }
}

/* ---- alliance ------------------------------------------------------------ */

async function loadAlliance() {
  const view = await query('alliance', {}, '#alliance-status');
  if (view) renderAlliance(view);
}

function renderAlliance({ alliance, invitations }) {
  $('#alliance-create').hidden = Boolean(alliance);
  $('#alliance-mine').hidden = !alliance;
  $('#alliance-invitations').replaceChildren(...(invitations.length
    ? invitations.map((inv) => el('li', {},
      `[${inv.tag}] ${inv.name} `,
      el('button', { type: 'button', class: 'small', onclick: (e) => answer('accept', inv, e.target) }, 'Accept'),
      ' ',
      el('button', { type: 'button', class: 'small secondary', onclick: (e) => answer('decline', inv, e.target) }, 'Decline')))
    : [el('li', { class: 'muted' }, 'No invitations.')]));
  if (!alliance) return;
  const leads = alliance.role === 'founder' || alliance.role === 'leader';
  $('#alliance-title').textContent = `[${alliance.tag}] ${alliance.name}`;
  $('#alliance-role').textContent = `You are ${alliance.role}.`;
  $('#alliance-invite').hidden = !leads;
  $('#alliance-members').replaceChildren(...alliance.members.map((m) => el('li', {},
    `${m.name} `, el('span', { class: 'muted' }, m.role),
    alliance.role === 'founder' && m.role !== 'founder' ? [
      ' ',
      el('button', { type: 'button', class: 'small secondary', onclick: (e) => promote(m, e.target) },
        m.role === 'leader' ? 'Make member' : 'Make leader'),
      ' ',
      el('button', { type: 'button', class: 'small secondary', onclick: (e) => kick(m, e.target) }, 'Kick'),
    ] : null)));
  $('#alliance-sent').replaceChildren(...alliance.invitations_sent.map((inv) =>
    el('li', { class: 'muted' }, `${inv.name} (invited ${fmtTime(inv.created_ms)})`)));
}

async function answer(verb, inv, button) {
  const done = await run(`alliance/${verb}`, { alliance_id: inv.alliance_id }, '#alliance-status',
    verb === 'accept' ? `You joined [${inv.tag}].` : 'Invitation declined.', button);
  if (done) loadAlliance();
}

async function promote(member, button) {
  const role = member.role === 'leader' ? 'member' : 'leader';
  if (await run('alliance/promote', { player_id: member.player_id, role }, '#alliance-status', `${member.name} is ${role} now.`, button)) loadAlliance();
}

async function kick(member, button) {
  if (!window.confirm(`Remove ${member.name} from the alliance?`)) return;
  if (await run('alliance/kick', { player_id: member.player_id }, '#alliance-status', `${member.name} was removed.`, button)) loadAlliance();
}

async function onCreate(event) {
  event.preventDefault();
  const name = $('#alliance-name').value.trim();
  const tag = $('#alliance-tag').value.trim();
  if (name.length < 3 || name.length > 24) return status('#alliance-status', 'The name has 3 to 24 characters.');
  if (!/^[A-Za-z0-9]{2,6}$/.test(tag)) return status('#alliance-status', 'The tag has 2 to 6 letters A-Z or digits.');
  if (await run('alliance/create', { name, tag }, '#alliance-status', 'Alliance founded.', event.submitter)) {
    event.target.reset();
    loadAlliance();
  }
  return null;
}

async function onInvite(event) {
  event.preventDefault();
  const name = $('#alliance-invitee').value.trim();
  if (!name) return status('#alliance-status', 'Whom? Type a player name.');
  if (await run('alliance/invite', { name }, '#alliance-status', `${name} is invited.`, event.submitter)) {
    event.target.reset();
    loadAlliance();
  }
  return null;
}

async function onLeave(event) {
  if (!window.confirm('Leave your alliance?')) return;
  const left = await run('alliance/leave', {}, '#alliance-status', 'You left the alliance.', event.target);
  if (left) loadAlliance();
}

/* ---- messages ------------------------------------------------------------ */

async function loadInbox() {
  const before = social.cursors[social.cursors.length - 1];
  const page = await query('messages', { limit: PAGE, before_id: before }, '#messages-status');
  if (page) renderInbox(page);
}

function renderInbox(page) {
  social.next = page.next_before_id;
  $('#messages-older').disabled = page.next_before_id === null;
  $('#messages-newer').disabled = social.cursors.length < 2;
  $('#messages-page').textContent = `page ${social.cursors.length}`;
  $('#messages-list').replaceChildren(...(page.messages.length ? page.messages.map((m) => {
    const body = el('p', { class: 'message-body' }, m.body); // text, line breaks kept by CSS
    body.hidden = !social.open.has(m.id);
    const head = el('button', { type: 'button', class: 'link', 'aria-expanded': String(!body.hidden), onclick: () => toggle(m, body, head) },
      m.is_read ? null : el('span', { class: 'dot', 'aria-label': 'unread' }, '● '),
      m.subject || '(no subject)');
    return el('li', { class: m.is_read ? null : 'unread' }, head,
      el('span', { class: 'muted' }, ` ${m.to_alliance ? 'alliance · ' : ''}from ${m.sender_name} · ${fmtTime(m.created_ms)}`),
      body);
  }) : [el('li', { class: 'muted' }, 'No messages.')]));
}

async function toggle(message, body, head) {
  body.hidden = !body.hidden;
  head.setAttribute('aria-expanded', String(!body.hidden));
  if (body.hidden) social.open.delete(message.id);
  else social.open.add(message.id);
  if (!body.hidden && !message.is_read) {
    message.is_read = true; // the snapshot's new unread count reloads the list
    await run('messages/read', { message_ids: [message.id] }, '#messages-status', '', null);
  }
}

function setBadge(unread) {
  const badge = $('#messages-unread');
  badge.hidden = !unread;
  badge.textContent = `${unread} new`;
}

async function onSend(event) {
  event.preventDefault();
  const toAlliance = $('#compose-alliance').checked;
  const to = $('#compose-to').value.trim();
  const subject = $('#compose-subject').value.trim();
  const body = $('#compose-body').value.trim();
  if (!toAlliance && !to) return status('#messages-status', 'Write to a player, or tick "my alliance".');
  if (!body) return status('#messages-status', 'The message is empty.');
  if (body.length > BODY_MAX || subject.length > SUBJECT_MAX) return status('#messages-status', `At most ${SUBJECT_MAX} characters of subject and ${BODY_MAX} of text.`);
  const message = toAlliance ? { to_alliance: true, subject, body } : { to, subject, body };
  if (await run('messages/send', message, '#messages-status', 'Message sent.', event.submitter)) event.target.reset();
  return null;
}

/* ---- wiring ----------------------------------------------------------------- */

function onSnapshot(snap) {
  const allianceKey = JSON.stringify([snap.alliance ?? null, snap.alliance_invitations ?? 0]);
  if (allianceKey !== social.allianceKey) {
    social.allianceKey = allianceKey;
    loadAlliance();
  }
  const unread = snap.unread_messages ?? 0;
  setBadge(unread);
  if (unread !== social.unread) {
    social.unread = unread; // a new message (or one was read): reload the page on screen
    loadInbox();
  }
}

function start() {
  $('#alliance-create').addEventListener('submit', onCreate);
  $('#alliance-invite').addEventListener('submit', onInvite);
  $('#alliance-leave').addEventListener('click', onLeave);
  $('#compose').addEventListener('submit', onSend);
  $('#compose-alliance').addEventListener('change', (e) => { $('#compose-to').disabled = e.target.checked; });
  $('#messages-older').addEventListener('click', () => {
    if (social.next === null) return;
    social.cursors.push(social.next);
    loadInbox();
  });
  $('#messages-newer').addEventListener('click', () => {
    if (social.cursors.length > 1) social.cursors.pop();
    loadInbox();
  });
  poller.addEventListener('snapshot', (event) => onSnapshot(event.detail));
  // the next player to log in on this page sees none of this one's lists
  $('#logout').addEventListener('click', reset);
  game.addEventListener('unauthorized', reset);
}

function reset() {
  Object.assign(social, { allianceKey: null, unread: null, cursors: [null], next: null });
  social.open.clear();
  for (const id of ['#alliance-invitations', '#alliance-members', '#alliance-sent', '#messages-list']) $(id).replaceChildren();
  for (const id of ['#alliance-status', '#messages-status']) status(id, '');
}

start();
