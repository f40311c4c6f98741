// Approvals queue: the tenant's approvals, newest first, refreshed every
// two seconds so a new one arrives without a reload; approve or reject
// (with the approver's name and a reason) for approvers and admins.

import { api, session, ApiError } from '../api.js';
import { el, time, toast, state } from '../dom.js';

export const title = 'Approvals';
export const path = '/approvals';
export const level = 'viewer';

const APPROVER = 'svc.console.approver';

export function render(main) {
  const body = el('div', { id: 'approvals-body' });
  const approver = el('input', { id: 'approver', value: sessionStorage.getItem(APPROVER) || '', autocomplete: 'name' });
  approver.addEventListener('change', () => sessionStorage.setItem(APPROVER, approver.value.trim()));
  const canDecide = session.can('approver');
  main.replaceChildren(...[el('h1', { text: 'Approvals' }),
    canDecide ? el('div', { class: 'panel inline-form' }, el('div', {}, el('label', { for: 'approver', text: 'Approver id (recorded with each decision)' }), approver)) : null,
    body].filter(Boolean));
  state(body, 'Loading approvals…');
  let stopped = false;
  let last = '';
  async function load() {
    try {
      const rows = await api('GET', '/approvals?limit=100');
      const key = JSON.stringify(rows);
      if (key !== last) { last = key; draw(rows); }
    } catch (e) {
      if (!stopped) state(body, 'Could not load approvals: ' + e.message, true);
    }
  }
  function draw(rows) {
    if (rows.length === 0) { state(body, 'No approvals yet. Calls that need approval appear here as they come.'); return; }
    const table = el('table', { 'aria-label': 'Approvals' },
      el('thead', {}, el('tr', {}, ['Status', 'Tool call', 'Agent', 'Requested', 'Expires', 'Decided by', ''].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows.map(row)));
    body.replaceChildren(table);
  }
  function row(a) {
    const tc = a.tool_call || {};
    const actions = el('div', { class: 'row-actions' });
    if (canDecide && a.status === 'PENDING') {
      actions.append(
        el('button', { type: 'button', class: 'approve', 'data-approval': a.approval_id, text: 'Approve', onclick: () => decide(a, 'approve') }),
        el('button', { type: 'button', class: 'danger reject', 'data-approval': a.approval_id, text: 'Reject', onclick: () => decide(a, 'reject') }),
        el('button', { type: 'button', class: 'secondary edit', 'data-approval': a.approval_id, text: 'Edit', onclick: () => edit(a) }));
    }
    return el('tr', { 'data-approval': a.approval_id },
      el('td', {}, el('span', { class: 'badge ' + a.status, 'data-status': a.status, text: a.status })),
      el('td', {}, el('code', { text: (tc.tool || '?') + '.' + (tc.action || '?') }), tc.resource ? el('div', { class: 'muted', text: tc.resource }) : null),
      el('td', {}, el('code', { text: a.agent_id })),
      el('td', {}, time(a.created_at)),
      el('td', {}, time(a.expires_at)),
      el('td', { text: a.approver_user_id || '—' }),
      el('td', {}, actions));
  }
  async function decide(a, verb) {
    const id = approver.value.trim();
    if (!id) { toast('Enter your approver id first.', true); approver.focus(); return; }
    sessionStorage.setItem(APPROVER, id);
    const body = { approver_user_id: id };
    if (verb === 'reject') body.reason = 'rejected from the console';
    try {
      await api('POST', '/approvals/' + encodeURIComponent(a.approval_id) + '/' + verb, body);
      toast((verb === 'approve' ? 'Approved ' : 'Rejected ') + a.approval_id);
    } catch (e) {
      toast(await explain(a, e), true);
    }
    last = '';
    load();
  }
  // explain turns a 409 into what happened to the approval meanwhile
  // (decided by someone else, or expired), read again from the gateway.
  async function explain(a, e) {
    if (!(e instanceof ApiError) || e.status !== 409) return e.message;
    try {
      const now = await api('GET', '/approvals/' + encodeURIComponent(a.approval_id));
      if (now.status === 'EXPIRED') return 'Not decided: ' + a.approval_id + ' has expired.';
      return 'Not decided: ' + a.approval_id + ' was already ' + now.status.toLowerCase() +
        (now.approver_user_id ? ' by ' + now.approver_user_id : '') + '.';
    } catch (e2) {
      return e.message;
    }
  }
  // edit approves the call with changed parameters (POST .../edit).
  function edit(a) {
    const params = el('textarea', { id: 'edit-parameters', rows: '6', cols: '60', spellcheck: 'false',
      'aria-label': 'Parameters of ' + a.approval_id, text: JSON.stringify((a.tool_call || {}).parameters || {}, null, 2) });
    const error = el('p', { class: 'error', role: 'alert' });
    const dialog = el('form', { class: 'panel', id: 'edit-form', 'aria-label': 'Edit and approve' },
      el('p', {}, 'Edit the parameters of ', el('code', { text: a.approval_id }), ', then approve them:'), params, error,
      el('div', { class: 'row-actions' },
        el('button', { type: 'submit', text: 'Approve with these parameters' }),
        el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => dialog.remove() })));
    dialog.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const id = approver.value.trim();
      if (!id) { error.textContent = 'Enter your approver id first.'; return; }
      let parameters;
      try { parameters = JSON.parse(params.value); } catch (e) { error.textContent = 'Not JSON: ' + e.message; return; }
      try {
        await api('POST', '/approvals/' + encodeURIComponent(a.approval_id) + '/edit', { approver_user_id: id, parameters });
        toast('Edited and approved ' + a.approval_id);
        dialog.remove();
        last = '';
        load();
      } catch (e) {
        error.textContent = await explain(a, e);
        last = '';
        load();
      }
    });
    body.before(dialog);
    params.focus();
  }
  load();
  const timer = setInterval(load, 2000);
  return () => { stopped = true; clearInterval(timer); };
}
