// Decisions: the latest decisions, and one decision with its receipt and,
// when the tenant's policies read it, the run context its policy saw.

import { api } from '../api.js';
import { el, time, state } from '../dom.js';
import { renderRunContext } from '../runcontext.js';

export const title = 'Decisions';
export const path = '/decisions';
export const level = 'viewer';

export function render(main, params) {
  const id = params.get('id');
  if (id) return one(main, id);
  const body = el('div', { id: 'decisions-body' });
  main.replaceChildren(el('h1', { text: 'Decisions' }), body);
  state(body, 'Loading decisions…');
  api('GET', '/decisions?limit=50').then((rows) => {
    if (rows.length === 0) { state(body, 'No decisions yet.'); return; }
    body.replaceChildren(el('table', { 'aria-label': 'Latest decisions' },
      el('thead', {}, el('tr', {}, ['When', 'Decision', 'Call', 'Reason', 'Run'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows.map((d) => el('tr', { 'data-decision': d.decision_id },
        el('td', {}, el('a', { href: '#/decisions?id=' + encodeURIComponent(d.decision_id) }, time(d.created_at))),
        el('td', {}, el('span', { class: 'badge', text: d.decision })),
        el('td', { text: d.tool + '.' + d.action }), el('td', { text: d.reason }),
        el('td', {}, d.run_id ? el('a', { href: '#/graph?kind=run&id=' + encodeURIComponent(d.run_id), text: d.run_id }) : '—'))))));
  }).catch((e) => state(body, 'Could not load decisions: ' + e.message, true));
  return null;
}

function one(main, id) {
  const body = el('div', { id: 'decision-body' });
  main.replaceChildren(el('h1', { text: 'Decision' }), el('p', {}, el('a', { href: '#/decisions', text: 'All decisions' })), body);
  state(body, 'Loading the decision…');
  api('GET', '/decisions/' + encodeURIComponent(id)).then((d) => {
    const rows = [['Decision', el('span', { id: 'decision-value', class: 'badge', text: d.decision })], ['Reason', d.reason],
      ['Call', d.tool + '.' + d.action], ['Agent', el('code', { text: d.agent_id })], ['When', time(d.created_at)],
      ['Matched policies', d.matched_policy_ids.join(', ') || '—'],
      ['Shadow policies', el('span', { id: 'decision-shadow',
        text: (d.shadow || []).map((s) => s.policy + ' would ' + s.decision).join(', ') || '—' })],
      ['Trust', d.trust_level],
      ['Run', d.run_id ? el('a', { href: '#/graph?kind=run&id=' + encodeURIComponent(d.run_id), text: d.run_id }) : '—'],
      ['Receipt', d.receipt_id ? el('code', { text: d.receipt_id }) : '—'], ['Action hash', el('code', { text: d.action_hash })]];
    const parts = [el('section', { class: 'panel', 'aria-label': 'The decision' }, el('dl', { class: 'facts' },
      rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)])))];
    parts.push(d.run_context ? renderRunContext(d.run_context, d.context_hash)
      : el('p', { id: 'run-context-none', class: 'state', text: 'No run context: no policy of the tenant read the run when this call was decided.' }));
    body.replaceChildren(...parts);
  }).catch((e) => state(body, 'Could not load the decision: ' + e.message, true));
  return null;
}
