/* webgame.js: the browser SDK every game's client shares.
 *
 * One ES module, no build step, no dependencies: `import { WebGame } from '/sdk/webgame.js'`.
 *
 *   const game = new WebGame();
 *   game.addEventListener('unauthorized', () => showLogin());   // a 401: no (more) session
 *   await game.login(name, password);                            // cookie session
 *   await game.clock.sync();                                     // game.clock.now(): server time
 *   const poller = game.poll();                                  // GET /api/snapshot with ETag
 *   poller.addEventListener('snapshot', (e) => render(e.detail));
 *   poller.addEventListener('alert', (e) => notify(e.detail));  // {kind, data}, pushed
 *   poller.start();
 *   await game.command('build', { village_id, kind });           // POST /api/build
 *   await game.query('map', { x, y, radius: 4 });                // GET /api/map?x=..
 *
 * Every failure is an ApiError (status 0 when the server was not reached) with the
 * API's {"error": {"code", "message"}}.
 */

const RETRY_CODES = new Set(['events_pending', 'unavailable']); // safe to retry: nothing changed
const KEY_BYTES = 16;

/* An error answer of the API, or a request that got none (status 0, code "network"). */
export class ApiError extends Error {
  constructor(status, code, message, { details = null, retryAfterMs = null } = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfterMs = retryAfterMs; // from Retry-After, when the server sent one
  }

  /* Retrying the same request later may succeed, and cannot do it twice (with its key). */
  get retryable() {
    return this.status === 0 || RETRY_CODES.has(this.code);
  }
}

/* Ids are 64-bit integers: above 2^53 a JS number would round them (and a command
 * would name another object). Unsafe integers are read as BigInt, from the
 * reviver's source text, and written back digit for digit by toJson. */
export function parseJson(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === 'number' && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)
      ? BigInt(context.source)
      : value);
}

export function toJson(value, space = undefined) {
  return JSON.stringify(value, (key, v) =>
    typeof v === 'bigint' ? (JSON.rawJSON ? JSON.rawJSON(String(v)) : Number(v)) : v, space);
}

/* A fresh Idempotency-Key (the server accepts [A-Za-z0-9._:-]{1,64}). getRandomValues,
 * unlike randomUUID, also works on a plain-http page that is not localhost. */
export function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(KEY_BYTES));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const pageHidden = () => typeof document !== 'undefined' && document.hidden;

function retryAfterMs(headers) {
  const seconds = Number(headers.get('Retry-After'));
  return Number.isFinite(seconds) && seconds >= 0 && headers.has('Retry-After') ? seconds * 1000 : null;
}

/* The server's clock: GET /api/time stamps the server's time somewhere within the
 * round trip, best guess its midpoint, so a sample is off by at most RTT/2; of a
 * round of samples the one with the smallest RTT is kept. */
export class ServerClock {
  constructor(game, { now = () => Date.now(), samples = 4 } = {}) {
    this.game = game;
    this.local = now; // the local clock (injectable for tests)
    this.samples = samples;
    this.offsetMs = 0; // server time = local time + offsetMs
    this.rttMs = null; // the round trip of the sample in use
    this.running = null;
  }

  now() {
    return this.local() + this.offsetMs;
  }

  /* One round of samples; true if one answered. A failed round keeps the old offset.
   * Calls during a round share it. */
  sync(samples = this.samples) {
    this.running ??= this.measure(samples).finally(() => { this.running = null; });
    return this.running;
  }

  async measure(samples) {
    let best = Infinity;
    for (let i = 0; i < samples; i++) {
      const t0 = this.local();
      let answer;
      try {
        answer = await this.game.send('GET', 'time');
      } catch {
        break;
      }
      const t1 = this.local();
      if (t1 - t0 < best) {
        best = t1 - t0;
        this.offsetMs = answer.data.server_time_ms - (t0 + t1) / 2;
        this.rttMs = best;
      }
    }
    return best !== Infinity;
  }
}

/* Polls a snapshot route with If-None-Match: the server answers 304 after one Redis
 * read while nothing changed. While nothing changes the interval doubles from
 * minMs up to maxMs; a change, a command or soon() starts again from minMs. A
 * hidden tab does not poll; the WebGame resumes it when the tab shows again.
 *
 * Pushed updates: where the browser has EventSource (and `push` is not false) the
 * poller also holds the server's event stream (GET /api/events). A `version` event
 * newer than the held ETag fetches the snapshot at once; while the stream is open
 * polling slows to one safety poll every safetyMs. A push can outrun the server's
 * answer (a web process still answers from the version it remembers until Redis tells
 * it of the change): while the held snapshot is older than the newest pushed version,
 * the poller polls again after catchUpMs, 2 catchUpMs, ... at most catchUpTries times,
 * then leaves it to the next push or safety poll. When the stream cannot be held
 * (an error, a 503, the server closed it) polling goes back to minMs..maxMs, and the
 * stream is tried again after pushRetryMs.
 *
 * Events: "snapshot" (detail: the new snapshot), "error" (detail: an ApiError;
 * polling goes on, except after a 401), "poll" (detail: {ok, status, changed, delayMs}
 * after every attempt; status 0: no answer), "alert" (detail: {kind, data}, pushed by
 * the game), "push" (detail: {open}: the stream opened or was lost). */
export class SnapshotPoller extends EventTarget {
  constructor(game, {
    path = 'snapshot',
    minMs = 1000,
    maxMs = 15000,
    push = typeof EventSource !== 'undefined',
    eventsPath = 'events',
    safetyMs = 120000,
    pushRetryMs = 30000,
    catchUpMs = 250,
    catchUpTries = 4,
  } = {}) {
    super();
    this.game = game;
    this.path = path;
    this.minMs = minMs;
    this.maxMs = maxMs;
    this.push = push;
    this.eventsPath = eventsPath;
    this.safetyMs = safetyMs;
    this.pushRetryMs = pushRetryMs;
    this.catchUpMs = catchUpMs;
    this.catchUpTries = catchUpTries;
    this.pushed = null; // the newest pushed version while the held snapshot is older
    this.tries = 0; // polls since then that did not bring it
    this.source = null; // the EventSource while the stream is wanted
    this.streaming = false; // the stream is open: polls are only a safety net
    this.pushTimer = 0;
    this.running = false;
    this.etag = null;
    this.snapshot = null;
    this.quiet = 0; // unchanged polls since the last change: drives the back-off
    this.timer = 0;
    this.inflight = false;
    this.again = false; // a poll was asked for while one was running
    this.generation = 0; // a stop or start meanwhile makes an answer stale
  }

  start() {
    this.stop();
    this.running = true;
    this.openStream();
    this.soon(0);
  }

  stop() {
    this.cancel();
    this.closeStream();
    this.running = false;
    this.generation++;
    this.etag = null;
    this.snapshot = null;
    this.pushed = null;
    this.tries = 0;
  }

  /* Something is expected to change: poll in ms and restart the back-off. */
  soon(ms = 0) {
    this.quiet = 0;
    this.schedule(ms);
  }

  /* The wait after `quiet` unchanged polls: minMs, minMs, 2 minMs, 4 minMs, ... maxMs;
   * safetyMs while the stream is open (it says when to fetch). */
  delayMs() {
    if (this.streaming) return this.safetyMs;
    return Math.min(this.minMs * 2 ** Math.max(0, this.quiet - 1), this.maxMs);
  }

  /* ---- the event stream */

  openStream() {
    if (!this.push || this.source || !this.running) return;
    const source = new EventSource(this.game.url(this.eventsPath), { withCredentials: true });
    this.source = source;
    source.addEventListener('open', () => {
      if (this.source !== source) return;
      this.setStreaming(true);
      this.soon(0); // changes before the stream opened were not pushed
    });
    source.addEventListener('version', (event) => {
      if (this.source !== source) return;
      const version = parseJson(event.data)?.version;
      if (version === undefined || !this.newer(version)) return;
      if (this.pushed === null || BigInt(version) > BigInt(this.pushed)) {
        this.pushed = String(version);
        this.tries = 0;
      }
      this.soon(0);
    });
    source.addEventListener('resync', () => {
      if (this.source === source) this.soon(0);
    });
    source.addEventListener('alert', (event) => {
      if (this.source !== source) return;
      let detail;
      try {
        detail = parseJson(event.data);
      } catch {
        return;
      }
      this.dispatchEvent(new CustomEvent('alert', { detail }));
    });
    source.addEventListener('error', () => {
      if (this.source !== source) return;
      // CONNECTING: the browser reconnects by itself; CLOSED (a 401, a 503): try again later.
      // Either way, poll meanwhile.
      this.setStreaming(false);
      if (source.readyState === EventSource.CLOSED) {
        this.closeStream();
        clearTimeout(this.pushTimer);
        this.pushTimer = setTimeout(() => { this.pushTimer = 0; this.openStream(); }, this.pushRetryMs);
      }
      this.soon(0);
    });
  }

  closeStream() {
    clearTimeout(this.pushTimer);
    this.pushTimer = 0;
    this.source?.close();
    this.source = null;
    this.setStreaming(false);
  }

  setStreaming(open) {
    if (this.streaming === open) return;
    this.streaming = open;
    this.dispatchEvent(new CustomEvent('push', { detail: { open } }));
  }

  /* A pushed version is newer than the snapshot held (the ETag is the quoted version). */
  newer(version) {
    const held = this.etag ? this.etag.replace(/^W\//, '').replace(/"/g, '') : '';
    if (!/^\d+$/.test(held)) return true;
    return BigInt(version) > BigInt(held);
  }

  /* The wait before the next poll: shorter while a pushed version has not come yet. */
  catchUp(delayMs) {
    if (this.pushed === null) return delayMs;
    if (this.newer(this.pushed) && this.tries < this.catchUpTries) {
      this.tries++;
      return Math.min(delayMs, this.catchUpMs * this.tries);
    }
    this.pushed = null; // held now, or given up: the next push or safety poll brings it
    this.tries = 0;
    return delayMs;
  }

  /* A poll is due (false while stopped or hidden). */
  get scheduled() {
    return this.timer !== 0;
  }

  schedule(ms) {
    this.cancel();
    if (!this.running || pageHidden()) return;
    this.timer = setTimeout(() => {
      this.timer = 0;
      this.pollNow();
    }, ms);
  }

  cancel() {
    clearTimeout(this.timer);
    this.timer = 0;
  }

  async pollNow() {
    if (this.inflight) {
      this.again = true;
      return;
    }
    this.inflight = true;
    const generation = this.generation;
    let status = 0;
    let ok = false;
    let changed = false;
    try {
      const headers = this.etag ? { 'If-None-Match': this.etag } : {};
      const answer = await this.game.send('GET', this.path, { headers });
      status = answer.status;
      ok = true;
      if (generation === this.generation && status !== 304) {
        this.etag = answer.etag;
        this.snapshot = answer.data;
        changed = true;
        this.dispatchEvent(new CustomEvent('snapshot', { detail: answer.data }));
      }
    } catch (error) {
      status = error.status ?? 0;
      if (generation === this.generation) {
        if (error.status === 401) this.stop(); // not logged in: the game says "unauthorized"
        this.dispatchEvent(new CustomEvent('error', { detail: error }));
      }
    } finally {
      this.inflight = false;
    }
    if (!this.running) return;
    const now = this.again || generation !== this.generation;
    this.again = false;
    this.quiet = changed || now ? 0 : this.quiet + 1;
    const delayMs = now ? 0 : this.catchUp(this.delayMs());
    this.dispatchEvent(new CustomEvent('poll', { detail: { ok, status, changed, delayMs } }));
    this.schedule(delayMs);
  }
}

/* The client of one game world. Events: "unauthorized" (detail: the ApiError) when
 * the server answers 401 for want of a valid session. */
export class WebGame extends EventTarget {
  constructor({
    base = '', // the server's origin; '' = this page's
    now = () => Date.now(),
    fetch: fetchFn = (...args) => globalThis.fetch(...args),
    headers = {}, // sent with every request
    retries = 3, // extra attempts of a command that failed retryably
    retryDelayMs = 400, // wait before retry n: retryDelayMs × n, or the server's Retry-After
    clockSamples = 4,
  } = {}) {
    super();
    this.base = base;
    this.fetch = fetchFn;
    this.headers = headers;
    this.retries = retries;
    this.retryDelayMs = retryDelayMs;
    this.clock = new ServerClock(this, { now, samples: clockSamples });
    this.poller = null;
    if (typeof document !== 'undefined') {
      document.addEventListener('visibilitychange', () => this.onVisibility());
    }
  }

  url(path) {
    return this.base + (path.startsWith('/') ? path : `/api/${path}`);
  }

  /* One request: {status, data, etag, headers} for a 2xx or 304, else an ApiError.
   * `path` is below /api/ unless it starts with '/'. */
  async send(method, path, { body, headers = {} } = {}) {
    const init = {
      method,
      headers: { Accept: 'application/json', ...this.headers, ...headers },
      cache: 'no-store', // the SDK sends If-None-Match itself and must see the 304
      credentials: 'same-origin',
    };
    if (method !== 'GET' && method !== 'HEAD') {
      init.headers['Content-Type'] = 'application/json'; // the API's CSRF rule: every POST is JSON
      init.body = toJson(body ?? {});
    }
    let res;
    let text;
    try {
      res = await this.fetch(this.url(path), init);
      text = await res.text(); // also a 304's empty body, or the request counts as aborted
    } catch {
      throw new ApiError(0, 'network', 'The server cannot be reached; check the connection and retry.');
    }
    let data = null;
    try {
      data = text ? parseJson(text) : null;
    } catch {
      // not JSON (a proxy's error page): the status alone is reported
    }
    if (res.ok || res.status === 304) {
      return { status: res.status, data, etag: res.headers.get('ETag'), headers: res.headers };
    }
    const error = new ApiError(
      res.status,
      data?.error?.code ?? `http_${res.status}`,
      data?.error?.message ?? `The server answered ${res.status}.`,
      { details: data?.error?.details ?? null, retryAfterMs: retryAfterMs(res.headers) },
    );
    if (error.status === 401 && error.code === 'unauthorized') {
      this.dispatchEvent(new CustomEvent('unauthorized', { detail: error }));
    }
    throw error;
  }

  /* GET /api/<path>?<params> (null and undefined params left out): the answer's JSON. */
  async query(path, params = {}) {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) {
      if (value !== null && value !== undefined) search.append(name, String(value));
    }
    const qs = search.toString();
    return (await this.send('GET', qs ? `${path}?${qs}` : path)).data;
  }

  /* POST /api/<name>: one logical command, one Idempotency-Key. A retryable failure
   * (no answer, events_pending, unavailable) is retried with the same key, so a
   * command whose answer was lost is answered from the server's record instead of
   * running twice. A success makes the poller fetch the snapshot now. */
  async command(name, body = {}, { key = newKey(), retries = this.retries } = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await this.send('POST', name, { body, headers: { 'Idempotency-Key': key } });
        this.poller?.soon(0);
        return answer.data;
      } catch (error) {
        if (!(error instanceof ApiError) || !error.retryable || attempt >= retries) throw error;
        await sleep(error.retryAfterMs ?? this.retryDelayMs * (attempt + 1));
      }
    }
  }

  /* Register or log in: the server sets the session cookie (HttpOnly: the page never
   * sees it). Answers {player_id, name, expires_ms, village_id, ...}. */
  async register(name, password) {
    return (await this.send('POST', 'register', { body: { name, password } })).data;
  }

  async login(name, password) {
    return (await this.send('POST', 'login', { body: { name, password } })).data;
  }

  /* Ends the session; one that had ended already counts as logged out too. */
  async logout() {
    this.poller?.stop();
    try {
      await this.send('POST', 'logout');
    } catch (error) {
      if (error.status !== 401) throw error;
    }
  }

  /* The snapshot poller of this game (one; options apply when it is made). */
  poll(options = {}) {
    this.poller ??= new SnapshotPoller(this, options);
    return this.poller;
  }

  /* A tab coming back may have a drifted clock (sleep, NTP) and missed changes. */
  async onVisibility() {
    if (pageHidden()) {
      this.poller?.cancel();
      return;
    }
    await this.clock.sync();
    if (this.poller?.running) this.poller.soon(0);
  }
}
