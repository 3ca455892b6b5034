/* The SDK's cases for tests/browser/test_sdk.py, run in Chromium against the real web tier
 * (the page is served on the web tier's origin by the test). Each case answers plain data
 * for the test to check; long-running ones keep their objects on window for later steps. */
import { ApiError, WebGame, newKey, toJson } from '/sdk/webgame.js';

const PASSWORD = 'sdk test password';
const COMMAND = 'test/spend'; // the test game's command (tests/web/minigame)

/* A WebGame whose requests are recorded as the page sent them. */
function recorded(options = {}) {
  const calls = [];
  const game = new WebGame({
    ...options,
    fetch: (url, init) => {
      calls.push({ url: String(url), at: performance.now(), headers: { ...init.headers } });
      return fetch(url, init);
    },
  });
  return { game, calls };
}

/* An error as data: what the SDK's typed error carries. */
async function failure(promise) {
  try {
    await promise;
    return null;
  } catch (error) {
    return {
      isApiError: error instanceof ApiError,
      isError: error instanceof Error,
      name: error.name,
      status: error.status,
      code: error.code,
      message: error.message,
      details: error.details,
      retryable: error.retryable,
      retryAfterMs: error.retryAfterMs,
    };
  }
}

async function firstVillage(game) {
  const snap = await game.query('snapshot');
  return snap.villages[0];
}

/* Clock sync: offsets from real /api/time answers. */
async function clockSync(skewMs) {
  // a local clock skewMs behind the server's (the same machine's clock, shifted)
  const skewed = recorded({ now: () => Date.now() - skewMs });
  const round = skewed.game.clock.sync();
  const shared = skewed.game.clock.sync() === round; // a second call joins the running round
  const ok = await round;

  // a scripted local clock: the offset is the server's stamp minus the midpoint of the
  // sample with the smallest round trip
  const stamps = [];
  const ticks = [0, 500, 1000, 1100]; // sample 1: RTT 500; sample 2: RTT 100, midpoint 1050
  const scripted = new WebGame({
    now: () => ticks.shift(),
    fetch: async (url, init) => {
      const answer = await fetch(url, init);
      stamps.push((await answer.clone().json()).server_time_ms);
      return answer;
    },
  });
  await scripted.clock.sync(2);

  // no answer: the old offset stays
  const down = new WebGame({ fetch: () => Promise.reject(new TypeError('offline')) });
  down.clock.offsetMs = 1234;
  const downOk = await down.clock.sync();

  return {
    ok,
    shared,
    timeCalls: skewed.calls.filter((c) => c.url.endsWith('/api/time')).length,
    offsetMs: skewed.game.clock.offsetMs,
    rttMs: skewed.game.clock.rttMs,
    scriptedOffsetMs: scripted.clock.offsetMs,
    scriptedRttMs: scripted.clock.rttMs,
    secondStamp: stamps[1],
    downOk,
    downOffsetMs: down.clock.offsetMs,
  };
}

/* Polling: starts a poller with a short back-off and leaves it on window.polling. */
async function startPolling(name, minMs, maxMs) {
  const { game, calls } = recorded();
  await game.register(name, PASSWORD);
  const poller = game.poll({ minMs, maxMs, push: false }); // the polling alone
  const polls = [];
  poller.addEventListener('poll', (event) => polls.push({ ...event.detail, at: performance.now() }));
  poller.addEventListener('snapshot', () => polls.push({ snapshot: true, at: performance.now() }));
  window.polling = { game, poller, calls, polls };
  poller.start();
}

async function pollingCommand() {
  const { game } = window.polling;
  const village = await firstVillage(game);
  await game.command(COMMAND, { village_id: village.id, wood: 1 });
}

/* Two logical commands (the test loses the first one's answer on the way back). */
async function idempotency(name) {
  const game = new WebGame({ retryDelayMs: 10 });
  await game.register(name, PASSWORD);
  const village = await firstVillage(game);
  const first = await game.command(COMMAND, { village_id: village.id, wood: 1 });
  const second = await game.command(COMMAND, { village_id: village.id, wood: 1 });
  const keys = [newKey(), newKey()];
  return { first: toJson(first), second: toJson(second), keys };
}

async function errors(name) {
  const game = new WebGame({ retries: 0 });
  const unauthorized = [];
  game.addEventListener('unauthorized', (event) => unauthorized.push(event.detail.code));
  const out = {};
  out.anonymous = await failure(game.query('snapshot'));
  await game.register(name, PASSWORD);
  const village = await firstVillage(game);
  out.duplicate = await failure(game.register(name, PASSWORD));
  out.invalid = await failure(game.command(COMMAND, { village_id: village.id, wood: 0 }));
  out.rule = await failure(game.command(COMMAND, { village_id: village.id, wood: 1000000 }));
  out.notFound = await failure(game.query('nothing-here'));
  out.badQuery = await failure(game.query('map', { x: 'west', y: 0 }));
  out.proxy = await failure(game.query('behind-a-proxy')); // the test answers it with HTML
  const map = await game.query('map', { x: village.x, y: village.y, radius: 1, skipped: null });
  out.mapHasOwnVillage = map.villages.some((v) => String(v.id) === String(village.id));
  out.wrongPassword = await failure(game.login(name, 'not the password'));
  out.eventsBeforeLogout = unauthorized.length;
  await game.logout();
  out.afterLogout = await failure(game.query('snapshot'));
  out.logoutAgain = await failure(game.logout()); // ended already: not an error
  out.login = (await game.login(name, PASSWORD)).name;
  out.afterLogin = (await game.query('snapshot')).name;
  out.unauthorized = unauthorized;

  // no answer at all: retried with the same key, then a typed network error
  const keys = [];
  const down = new WebGame({
    retries: 2,
    retryDelayMs: 1,
    fetch: (url, init) => {
      keys.push(init.headers['Idempotency-Key']);
      return Promise.reject(new TypeError('offline'));
    },
  });
  out.network = await failure(down.command(COMMAND, { village_id: village.id, wood: 1 }));
  out.networkKeys = keys;
  return out;
}

/* Pushed updates: a poller holding the event stream, its polls far too slow to explain
 * a quick refresh. Returns the player's village id (another player notifies it). */
async function startPushed(name) {
  const { game, calls } = recorded();
  await game.register(name, PASSWORD);
  const village = await firstVillage(game);
  const poller = game.poll({ minMs: 600000, maxMs: 600000, safetyMs: 600000 });
  const seen = { snapshots: [], alerts: [], push: [], polls: [] };
  poller.addEventListener('snapshot', (event) => seen.snapshots.push({ at: performance.now(), snap: event.detail }));
  poller.addEventListener('poll', (event) => seen.polls.push(event.detail));
  poller.addEventListener('alert', (event) => seen.alerts.push(event.detail));
  poller.addEventListener('push', (event) => seen.push.push(event.detail.open));
  window.pushed = { game, poller, calls, seen };
  poller.start();
  return String(village.id);
}

/* A stream the server refuses (404): the poller keeps polling with its back-off. */
async function startUnpushed(name) {
  const { game, calls } = recorded();
  await game.register(name, PASSWORD);
  const poller = game.poll({ minMs: 40, maxMs: 200, eventsPath: 'no-such-stream', pushRetryMs: 600000 });
  const polls = [];
  const push = [];
  poller.addEventListener('poll', (event) => polls.push(event.detail));
  poller.addEventListener('push', (event) => push.push(event.detail.open));
  window.unpushed = { game, poller, calls, polls, push };
  poller.start();
}

/* A WebGame that only waits for the tab to show again (its clock resyncs then). */
function idleGame() {
  window.idle = new WebGame();
}

window.cases = { clockSync, startPolling, pollingCommand, idempotency, errors, idleGame, startPushed, startUnpushed };
