// Alerts: the tenant's alerts, newest first, updated live over the alerts
// stream (watch=true with a ticket), filtered by severity on the gateway;
// each links to its agent's evidence graph.

import { el, time, state } from '../dom.js';
import { liveRows } from '../live.js';

export const title = 'Alerts';
export const path = '/alerts';
export const level = 'viewer';

export function render(main) {
  const severity = el('select', { id: 'alerts-severity' }, ['', 'HIGH', 'MEDIUM', 'LOW', 'INFO'].map((v) => el('option', { value: v, text: v || 'all' })));
  const status = el('p', { id: 'alerts-status', class: 'state', role: 'status' });
  const body = el('div', { id: 'alerts-body' });
  main.replaceChildren(el('h1', { text: 'Alerts' }),
    el('div', { class: 'panel inline-form' }, el('div', {}, el('label', { for: 'alerts-severity', text: 'Severity' }), severity)),
    status, body);

  function draw(list) {
    if (list.length === 0) {
      state(body, severity.value ? 'No ' + severity.value + ' alerts.' : 'No alerts. Detection rules raise them here as they fire.');
      return;
    }
    body.replaceChildren(el('table', { 'aria-label': 'Alerts' },
      el('thead', {}, el('tr', {}, ['Raised', 'Severity', 'Alert', 'Summary', 'Rule', 'Agent'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, list.map((a) => el('tr', { 'data-alert': a.alert_id, 'data-alert-name': a.alert_name, 'data-severity': a.severity, 'data-agent': a.agent_id || null },
        el('td', {}, time(a.created_at)),
        el('td', {}, el('span', { class: 'badge ' + a.severity, text: a.severity })),
        el('td', {}, el('code', { text: a.alert_name })),
        el('td', { text: a.summary }),
        el('td', { text: a.rule_key + ' (' + a.source + ')' }),
        el('td', {}, a.agent_id ? el('a', { href: '#/graph?kind=agent&id=' + encodeURIComponent(a.agent_id), text: a.agent_id }) : '—'))))));
  }
  let live = null;
  function start() {
    if (live) live.close();
    state(body, 'Loading alerts…');
    const q = severity.value ? '?severity=' + encodeURIComponent(severity.value) : '';
    live = liveRows({ path: '/alerts' + q, id: 'alert_id', at: 'created_at', status, onRows: draw,
      onError: (e) => state(body, 'Could not load alerts: ' + e.message, true) });
  }
  severity.addEventListener('change', start);
  start();
  return () => live.close();
}
