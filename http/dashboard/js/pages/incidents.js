// Incidents: the tenant's incidents, newest first, updated live over the
// incidents stream (watch=true with a ticket); close (admins), the
// evidence pack download and the incident's graph.

import { api, session, download as downloadFile } from '../api.js';
import { el, time, toast, state } from '../dom.js';
import { liveRows } from '../live.js';

export const title = 'Incidents';
export const path = '/incidents';
export const level = 'viewer';

export function render(main) {
  const body = el('div', { id: 'incidents-body' });
  const status = el('p', { id: 'incidents-status', class: 'state', role: 'status' });
  main.replaceChildren(el('h1', { text: 'Incidents' }), status, body);
  state(body, 'Loading incidents…');

  function draw(list) {
    if (list.length === 0) { state(body, 'No incidents. Correlated attacks open one here as they happen.'); return; }
    body.replaceChildren(el('table', { 'aria-label': 'Incidents' },
      el('thead', {}, el('tr', {}, ['Opened', 'Severity', 'Kind', 'Summary', 'Status', ''].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, list.map(row))));
  }
  function row(i) {
    const actions = el('div', { class: 'row-actions' },
      el('button', { type: 'button', class: 'secondary pack', text: 'Evidence pack', onclick: () => download(i) }),
      el('a', { href: '#/graph?kind=incident&id=' + encodeURIComponent(i.incident_id), text: 'Graph' }));
    if (session.can('admin') && i.status === 'open') {
      actions.append(el('button', { type: 'button', class: 'danger close', text: 'Close', onclick: () => close(i) }));
    }
    return el('tr', { 'data-incident': i.incident_id, 'data-kind': i.kind },
      el('td', {}, time(i.opened_at)), el('td', {}, el('span', { class: 'badge', text: i.severity })),
      el('td', { text: i.kind }), el('td', { text: i.summary }), el('td', { class: 'incident-status', text: i.status }), el('td', {}, actions));
  }
  async function close(i) {
    try {
      const updated = await api('POST', '/incidents/' + encodeURIComponent(i.incident_id) + '/close', { reason: 'closed from the console' });
      live.set(updated);
      toast('Closed incident ' + i.incident_id);
    } catch (e) {
      toast(e.message, true);
    }
  }
  async function download(i) {
    try {
      await downloadFile('/incidents/' + encodeURIComponent(i.incident_id) + '/evidence-pack', 'incident-' + i.incident_id + '-evidence.zip');
    } catch (e) {
      toast('The evidence pack could not be downloaded: ' + e.message, true);
    }
  }
  const live = liveRows({ path: '/incidents', id: 'incident_id', at: 'opened_at', keep: 200, status, onRows: draw,
    onError: (e) => state(body, 'Could not load incidents: ' + e.message, true) });
  return () => live.close();
}
