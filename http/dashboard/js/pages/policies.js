// Policies: the tenant's Rego policies with their source; admins save one,
// and a module that does not compile shows each error at its line and
// column.

import { api, session, ApiError } from '../api.js';
import { el, state, toast } from '../dom.js';

export const title = 'Policies';
export const path = '/policies';
export const level = 'viewer';

export function render(main) {
  const body = el('div', { id: 'policies-body' });
  const admin = session.can('admin');
  const name = el('input', { id: 'policy-name', required: true, spellcheck: 'false' });
  const rego = el('textarea', { id: 'policy-rego', rows: '10', cols: '80', spellcheck: 'false' });
  const errors = el('div', { id: 'policy-errors', role: 'alert' });
  const form = admin ? el('form', { class: 'panel', 'aria-label': 'Save a policy' },
    el('label', { for: 'policy-name', text: 'Name' }), name,
    el('label', { for: 'policy-rego', text: 'Rego (package svc.policies.<name>)' }), rego, errors,
    el('button', { type: 'submit', id: 'policy-save', text: 'Save policy' })) : null;
  main.replaceChildren(...[el('h1', { text: 'Policies' }), form, body].filter(Boolean));

  async function load() {
    state(body, 'Loading policies…');
    try {
      const rows = await api('GET', '/policies');
      if (rows.length === 0) { state(body, 'No tenant policies: the base policy set decides alone.'); return; }
      body.replaceChildren(...rows.map((p) => el('details', { class: 'panel', 'data-policy': p.name },
        el('summary', {}, el('strong', { text: p.name }), ' · version ' + p.version + (p.mode === 'shadow' ? ' · shadow (never decides)' : '') + (p.enabled ? '' : ' · disabled')),
        p.description ? el('p', { class: 'muted', text: p.description }) : '',
        el('pre', { class: 'details', text: p.rego }))));
    } catch (e) {
      state(body, 'Could not load policies: ' + e.message, true);
    }
  }
  if (form) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      errors.replaceChildren();
      const n = name.value.trim();
      try {
        try {
          await api('POST', '/policies', { name: n, rego: rego.value });
        } catch (e) {
          if (!(e instanceof ApiError) || e.status !== 409) throw e;
          await api('PUT', '/policies/' + encodeURIComponent(n), { rego: rego.value, enabled: true }); // it exists: replace it
        }
        toast('Saved policy ' + n);
        load();
      } catch (e) {
        const list = e instanceof ApiError && Array.isArray(e.details.errors) ? e.details.errors : [];
        errors.replaceChildren(el('p', { class: 'error', text: e.message }),
          list.length ? el('ul', { id: 'compile-errors' }, list.map((x) => el('li', { class: 'compile-error', text: 'line ' + x.line + ', column ' + x.col + ': ' + x.message }))) : '');
      }
    });
  }
  load();
}
