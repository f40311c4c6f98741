// Operations status: who leads, the leader's maintenance jobs and their
// last runs, this tenant's receipt chain integrity, dead background tasks
// and the audit writer, from GET /status. Refreshed every 10 s while open.

import { api } from '../api.js';
import { el, state, time } from '../dom.js';

export const title = 'Status';
export const path = '/status';
export const level = 'viewer';

const chainText = {
  verified: 'Verified: every link up to the head checks.',
  behind: 'Verified up to an earlier link; the links since wait for the next run.',
  broken: 'The integrity job found a link that does not verify.',
  never_checked: 'Not checked yet: the integrity job has not run since this tenant was created.',
};

export function render(main) {
  const body = el('div', { id: 'status-body' });
  main.replaceChildren(el('h1', { text: 'Operations status' }), body);
  state(body, 'Loading…');
  let timer = null;
  let first = true;

  function load() {
    api('GET', '/status').then((st) => {
      body.replaceChildren(leader(st), chain(st.receipt_chain), jobs(st.jobs), tasks(st));
      first = false;
    }).catch((e) => {
      if (first) state(body, 'Could not load the status: ' + e.message, true);
    });
  }
  load();
  timer = setInterval(load, 10000);
  return () => clearInterval(timer);
}

function section(id, heading, ...children) {
  return el('section', { id, 'aria-labelledby': id + '-h' }, el('h2', { id: id + '-h', text: heading }), ...children);
}

function leader(st) {
  const who = st.leader_node_id
    ? el('span', { id: 'status-leader', text: st.leader_node_id })
    : el('span', { id: 'status-leader', class: 'badge HIGH', text: 'none: a takeover is under way' });
  return section('status-leadership', 'Leadership',
    el('p', {}, 'Leader: ', who, st.lease_expires_at ? el('span', { class: 'muted' }, ' (lease until ', time(st.lease_expires_at), ')') : ''),
    el('p', { class: 'muted', text: 'Answered by node ' + st.node_id + (st.leader ? ', the leader.' : ', a standby.') }));
}

function chain(c) {
  const badge = el('span', { id: 'status-chain', class: 'badge ' + (c.status === 'broken' ? 'HIGH' : c.status === 'verified' ? 'APPROVED' : 'PENDING'),
    text: c.status.replace('_', ' ') });
  const lines = [el('p', {}, badge, ' ', chainText[c.status] || '')];
  if (c.status === 'broken') {
    lines.push(el('p', { id: 'status-chain-break', class: 'error', role: 'alert',
      text: 'First broken link: seq ' + c.broken_seq + ': ' + c.broken_error + '. A HIGH receipt_chain_broken alert was raised.' }));
  }
  lines.push(el('p', { class: 'muted' }, 'Head seq ' + c.head_seq + ', verified up to seq ' + c.verified_seq + '; last checked ', time(c.checked_at), '.'));
  return section('status-receipts', 'Receipt chain integrity', ...lines);
}

function jobs(list) {
  const secs = (n) => (n % 86400 === 0 ? n / 86400 + ' d' : n % 3600 === 0 ? n / 3600 + ' h' : n % 60 === 0 ? n / 60 + ' min' : n + ' s');
  const rows = list.map((j) => el('tr', { 'data-job': j.job },
    el('th', { scope: 'row', text: j.job.replaceAll('_', ' ') }),
    el('td', { text: 'every ' + secs(j.interval_secs) }),
    el('td', {}, time(j.last_run_at)),
    el('td', {}, j.last_outcome ? el('span', { class: 'badge ' + (j.last_outcome === 'ok' ? 'APPROVED' : 'HIGH'), text: j.last_outcome }) : el('span', { class: 'muted', text: 'not run yet' })),
    el('td', { text: j.last_duration_ms === null ? '—' : j.last_duration_ms.toFixed(1) + ' ms' }),
    el('td', { text: j.last_node_id || '—' }),
    el('td', { text: j.last_error || j.last_summary || '' }),
    el('td', { text: j.runs + (j.failures ? ' (' + j.failures + ' failed)' : '') })));
  return section('status-jobs', 'Maintenance jobs (leader only)',
    el('table', { 'aria-label': 'Maintenance jobs' },
      el('thead', {}, el('tr', {}, ['Job', 'Interval', 'Last run', 'Outcome', 'Took', 'Node', 'Result', 'Runs'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows)));
}

function tasks(st) {
  const dead = st.dead_background_tasks || [];
  const writer = el('span', { id: 'status-writer', class: 'badge ' + (st.audit_writer === 'ok' ? 'APPROVED' : 'HIGH'), text: st.audit_writer });
  const writerDetail = (st.components || []).find((c) => c.name === 'audit_writer');
  return section('status-tasks', 'Background tasks on node ' + st.node_id,
    el('p', {}, 'Audit writer: ', writer, writerDetail && writerDetail.detail ? ' ' + writerDetail.detail : ''),
    dead.length === 0
      ? el('p', { id: 'status-dead', text: 'No background task is dead.' })
      : el('p', { id: 'status-dead', class: 'error', role: 'alert', text: 'Dead (restart budget spent): ' + dead.join(', ') }),
    el('table', { 'aria-label': 'Background tasks' },
      el('thead', {}, el('tr', {}, ['Task', 'State', 'Restarts', 'Since', 'Detail'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, (st.components || []).map((c) => el('tr', { 'data-task': c.name },
        el('th', { scope: 'row', text: c.name.replaceAll('_', ' ') }),
        el('td', {}, el('span', { class: 'badge ' + (c.state === 'ok' ? 'APPROVED' : c.state === 'dead' ? 'HIGH' : 'PENDING'), text: c.state })),
        el('td', { text: String(c.restarts) }), el('td', {}, time(c.since)), el('td', { text: c.detail || '' }))))));
}
