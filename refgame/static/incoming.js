/* The incoming-attack alert: a banner the defender cannot miss, and the tab's title.
 *
 * Hostile marches come from the snapshot (attacks and raids reaching one of the
 * player's villages from a village not theirs) and from the pushed
 * ``incoming_attack`` alert, which shows before the snapshot is fetched. The banner
 * names the soonest one with a countdown to its arrival, says how many more come,
 * and stays until the player dismisses it or the march arrives; a new march shows it
 * again. While it shows, the tab's title counts down too. */

const HOSTILE = new Set(['attack', 'raid']);

function fmtDuration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const pad = (n) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

const xy = (p) => (p && p.x !== null && p.x !== undefined ? ` from (${p.x}|${p.y})` : '');

export class IncomingAlert {
  /* ``banner``: #alert-banner with #alert-text and #alert-countdown inside. */
  constructor(banner) {
    this.banner = banner;
    this.text = banner.querySelector('#alert-text');
    this.countdown = banner.querySelector('#alert-countdown');
    this.baseTitle = document.title;
    this.marches = new Map(); // march id (string) -> {kind, target, origin, arrive_ms}
    this.dismissed = new Set(); // march ids the player closed the banner for
    this.shownKey = '';
  }

  /* Every hostile march reaching the player's villages, as the snapshot has them. */
  fromSnapshot(snap) {
    const own = new Set(snap.villages.map((v) => String(v.id)));
    this.marches.clear();
    for (const v of snap.villages) {
      for (const m of v.marches_in ?? []) {
        if (!HOSTILE.has(m.kind) || own.has(String(m.origin.id)) || !own.has(String(m.target.id))) continue;
        this.marches.set(String(m.id), { kind: m.kind, target: v.name, origin: m.origin, arrive_ms: Number(m.arrive_ms) });
      }
    }
  }

  /* A pushed alert (refgame/commands.py send_march): shown before the snapshot is in. */
  fromPush(data, targetName) {
    if (!data || !HOSTILE.has(data.kind)) return;
    this.marches.set(String(data.march_id), {
      kind: data.kind, target: targetName, origin: data.origin, arrive_ms: Number(data.arrive_ms),
    });
  }

  dismiss() {
    for (const id of this.marches.keys()) this.dismissed.add(id);
    this.hide();
  }

  clear() {
    this.marches.clear();
    this.dismissed.clear();
    this.hide();
  }

  hide() {
    this.banner.hidden = true;
    this.shownKey = '';
    if (document.title !== this.baseTitle) document.title = this.baseTitle;
  }

  /* Redraw at server time ``now``: the soonest march not dismissed and not yet arrived. */
  tick(now) {
    const coming = [...this.marches.entries()]
      .filter(([id, m]) => m.arrive_ms > now && !this.dismissed.has(id))
      .sort((a, b) => a[1].arrive_ms - b[1].arrive_ms);
    if (!coming.length) {
      if (!this.banner.hidden) this.hide();
      return;
    }
    const [id, m] = coming[0];
    const key = `${id}:${coming.length}`;
    if (key !== this.shownKey) { // the text changes only when the marches do
      this.shownKey = key;
      const on = m.target ? ` on ${m.target}` : '';
      const more = coming.length > 1 ? ` (${coming.length - 1} more coming)` : '';
      this.text.textContent = `Incoming ${m.kind === 'raid' ? 'raid' : 'attack'}${on}${xy(m.origin)}, `
        + `arriving ${new Date(m.arrive_ms).toLocaleTimeString()}${more}.`;
      this.banner.hidden = false;
    }
    const left = fmtDuration(m.arrive_ms - now);
    if (this.countdown.textContent !== left) this.countdown.textContent = left;
    const title = `⚠ ${left} ${m.kind === 'raid' ? 'Raid' : 'Attack'}! – ${this.baseTitle}`;
    if (document.title !== title) document.title = title;
  }
}
