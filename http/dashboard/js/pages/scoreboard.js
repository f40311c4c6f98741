// Risk scoreboard: agents ranked by their 24-hour mean composite risk, the
// trend against the day before, and the CSV download.

import { api, download as downloadFile } from '../api.js';
import { el, state, toast } from '../dom.js';

export const title = 'Risk';
export const path = '/scoreboard';
export const level = 'viewer';

export function render(main) {
  const body = el('div', { id: 'scoreboard-body' });
  const csv = el('button', { type: 'button', class: 'secondary', id: 'scoreboard-csv', text: 'Download CSV', onclick: download });
  main.replaceChildren(el('h1', { text: 'Risk scoreboard' }), el('p', {}, csv), body);
  state(body, 'Loading…');
  api('GET', '/agents/risk-scoreboard').then((rows) => {
    if (rows.length === 0) { state(body, 'No agents yet.'); return; }
    const num = (v) => (v === null || v === undefined ? '—' : v.toFixed(1));
    body.replaceChildren(el('table', { 'aria-label': 'Risk scoreboard' },
      el('thead', {}, el('tr', {}, ['Rank', 'Agent', 'Mean (24 h)', 'Previous 24 h', 'Trend', 'Decisions (24 h)'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows.map((r, i) => el('tr', { 'data-agent': r.agent_id }, el('td', { text: String(i + 1) }),
        el('td', {}, el('a', { href: '#/graph?kind=agent&id=' + encodeURIComponent(r.agent_id), text: r.name })),
        el('td', { text: num(r.mean_composite_risk_24h) }), el('td', { text: num(r.previous_mean_24h) }),
        el('td', {}, el('span', { class: 'badge trend-' + r.trend, text: r.trend })), el('td', { text: String(r.decisions_24h) }))))));
  }).catch((e) => state(body, 'Could not load the scoreboard: ' + e.message, true));

  async function download() {
    try {
      await downloadFile('/agents/risk-scoreboard?format=csv', 'risk-scoreboard.csv');
    } catch (e) {
      toast('The CSV could not be downloaded: ' + e.message, true);
    }
  }
}
