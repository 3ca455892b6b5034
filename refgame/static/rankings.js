/* The Rankings panel: players by population, attack points or defence points
 * (GET /api/rankings, as the server's ranking job last computed them), a page at a
 * time, with the player's own rank above the table and their row marked. */
import { icon } from './icons.js';

const PER_PAGE = 10;
const KINDS = { population: 'Population', attack: 'Attack points', defence: 'Defence points' };

export class RankingsPanel {
  /* ``root``: the panel's section; ``query(path, params)``: GET /api/<path>, null on error. */
  constructor(root, query) {
    this.root = root;
    this.query = query;
    this.kind = 'population';
    this.page = 1;
    this.pages = 1;
    this.playerId = null;
    this.table = root.querySelector('#rankings-table');
    this.me = root.querySelector('#rankings-me');
    this.pageText = root.querySelector('#rankings-page');
    this.prev = root.querySelector('#rankings-prev');
    this.next = root.querySelector('#rankings-next');
    this.tabs = [...root.querySelectorAll('button[data-ranking]')];
    for (const tab of this.tabs) {
      tab.prepend(icon(tab.dataset.ranking, 18) ?? '');
      tab.addEventListener('click', () => { this.kind = tab.dataset.ranking; this.page = 1; this.load(); });
    }
    this.prev.addEventListener('click', () => { this.page = Math.max(1, this.page - 1); this.load(); });
    this.next.addEventListener('click', () => { this.page = Math.min(this.pages, this.page + 1); this.load(); });
    root.querySelector('#rankings-refresh').addEventListener('click', () => this.load());
  }

  async load(playerId = this.playerId) {
    this.playerId = playerId;
    for (const tab of this.tabs) tab.setAttribute('aria-pressed', String(tab.dataset.ranking === this.kind));
    const data = await this.query('rankings', { kind: this.kind, page: this.page, limit: PER_PAGE });
    if (data) this.render(data);
  }

  render(data) {
    const unit = KINDS[data.kind] ?? data.kind;
    this.pages = Math.max(1, Math.ceil(data.total / PER_PAGE));
    this.me.textContent = data.me
      ? `Your rank: ${data.me.rank} of ${data.total} (${data.me.value} ${unit.toLowerCase()}).`
      : data.computed_ms ? 'You are not ranked yet.' : 'The rankings are computed every minute; none yet.';
    const head = document.createElement('tr');
    for (const text of ['#', 'Player', unit]) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = text;
      head.append(th);
    }
    const rows = data.rows.map((r) => {
      const tr = document.createElement('tr');
      if (String(r.player_id) === String(this.playerId)) tr.className = 'me';
      for (const text of [String(r.rank), r.name, String(r.value)]) {
        const td = document.createElement('td');
        td.textContent = text; // player names are chosen by players: text, never HTML
        tr.append(td);
      }
      return tr;
    });
    this.table.replaceChildren(head, ...rows);
    this.pageText.textContent = `Page ${data.page} of ${this.pages}`;
    this.prev.disabled = data.page <= 1;
    this.next.disabled = data.page >= this.pages;
  }
}
