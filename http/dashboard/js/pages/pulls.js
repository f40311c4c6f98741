// Pull requests: the ones the tenant's agents touched through the code-host
// tool, with the Security Gate's conclusion and counts (GET
// /v2/codehost/pull-requests), refreshed every five seconds.

import { api } from '../api.js';
import { el, state } from '../dom.js';

export const title = 'Pull requests';
export const path = '/pulls';
export const level = 'viewer';

const badge = { failure: 'REJECTED', action_required: 'PENDING', success: 'APPROVED' };

export function render(main) {
  const body = el('div', { id: 'pulls-body' });
  main.replaceChildren(el('h1', { text: 'Pull requests' }),
    el('p', { class: 'muted', text: 'The Security Gate\'s check run on each pull request your agents touched: denied calls fail it, calls waiting for approval hold it.' }),
    body);
  state(body, 'Loading pull requests…');
  let stopped = false;
  async function load() {
    try {
      const rows = await api('GET', '/codehost/pull-requests');
      if (rows.length === 0) { state(body, 'No pull requests yet (or the Security Gate is off: SVC_CODEHOST_APP_TOKEN is unset).'); return; }
      body.replaceChildren(el('table', { 'aria-label': 'Pull requests' },
        el('thead', {}, el('tr', {}, ['Pull request', 'Gate', 'Allowed', 'Denied', 'Pending', 'Comments', 'Check run'].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, rows.map((p) => el('tr', { 'data-pull': p.pull_request },
          el('td', {}, el('code', { text: p.pull_request })),
          el('td', {}, el('span', { class: 'badge gate ' + (badge[p.conclusion] || ''), text: p.conclusion })),
          el('td', { class: 'allowed', text: String(p.allowed) }), el('td', { class: 'denied', text: String(p.denied) }),
          el('td', { class: 'pending', text: String(p.pending) }), el('td', { text: String(p.comments) }),
          el('td', {}, p.check_run_id ? el('span', { text: '#' + p.check_run_id + (p.check_run_conclusion !== p.conclusion ? ' (updating)' : '') })
            : el('span', { class: 'muted', text: 'not written yet' })))))));
    } catch (e) {
      if (!stopped) state(body, 'Could not load pull requests: ' + e.message, true);
    }
  }
  load();
  const timer = setInterval(load, 5000);
  return () => { stopped = true; clearInterval(timer); };
}
