// Policies: the tenant's Rego policies with their source; admins save one
// (enforced, or in shadow: it runs on live calls and never decides), or
// first simulate it over the last 24 hours of recorded decisions; a module
// that does not compile shows each error at its line and column.

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
  const shadow = el('input', { id: 'policy-shadow', type: 'checkbox' });
  const simulateButton = el('button', { type: 'button', id: 'policy-simulate', text: 'Simulate over the last 24 hours' });
  const simulation = el('section', { id: 'simulation', 'aria-live': 'polite' });
  const form = admin ? el('form', { class: 'panel', 'aria-label': 'Save a policy' },
    el('label', { for: 'policy-name', text: 'Name' }), name,
    el('label', { for: 'policy-rego', text: 'Rego (package svc.policies.<name>)' }), rego,
    el('label', { for: 'policy-shadow', class: 'check' }, shadow, ' Shadow: run on every live call, never decide (each decision shows what it would have added)'),
    errors, el('div', { class: 'actions' }, el('button', { type: 'submit', id: 'policy-save', text: 'Save policy' }), ' ', simulateButton),
    simulation) : null;
  main.replaceChildren(...[el('h1', { text: 'Policies' }), form, body].filter(Boolean));

  function showErrors(e) {
    const list = e instanceof ApiError && Array.isArray(e.details.errors) ? e.details.errors : [];
    errors.replaceChildren(el('p', { class: 'error', text: e.message }),
      list.length ? el('ul', { id: 'compile-errors' }, list.map((x) => el('li', { class: 'compile-error', text: 'line ' + x.line + ', column ' + x.col + ': ' + x.message }))) : '');
  }

  // renderSimulation shows what the candidate would have decided.
  function renderSimulation(r) {
    const pct = r.evaluated ? (100 * r.changed / r.evaluated).toFixed(1) : '0.0';
    const transitions = Object.entries(r.transitions).sort();
    simulation.replaceChildren(el('h2', { text: 'What it would have decided' }),
      el('p', { id: 'simulation-summary', text: r.evaluated + ' decisions evaluated, ' + r.changed + ' changed (' + pct + '%), ' +
        r.skipped + ' skipped' + (r.without_context ? ', ' + r.without_context + ' without the run context it reads' : '') + '.' }),
      transitions.length ? el('table', { 'aria-label': 'Changes by outcome' },
        el('thead', {}, el('tr', {}, ['Recorded → simulated', 'Decisions'].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, transitions.map(([k, n]) => el('tr', { 'data-transition': k },
          el('td', { text: k.replace('->', ' → ') }), el('td', { text: String(n) }))))) : '',
      r.changes.length ? el('ul', { id: 'simulation-changes' }, r.changes.slice(0, 20).map((c) => el('li', {},
        el('a', { href: '#/decisions?id=' + encodeURIComponent(c.decision_id), text: c.decision_id }),
        ': ' + c.recorded + ' → ' + c.simulated + (c.policies.length ? ' (' + c.policies.join(', ') + ')' : '')))) : '');
  }

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
        const mode = shadow.checked ? 'shadow' : 'enforce';
        try {
          await api('POST', '/policies', { name: n, rego: rego.value, mode });
        } catch (e) {
          if (!(e instanceof ApiError) || e.status !== 409) throw e;
          await api('PUT', '/policies/' + encodeURIComponent(n), { rego: rego.value, enabled: true, mode }); // it exists: replace it
        }
        toast('Saved policy ' + n + (mode === 'shadow' ? ' in shadow' : ''));
        load();
      } catch (e) {
        showErrors(e);
      }
    });
    simulateButton.addEventListener('click', async () => {
      errors.replaceChildren();
      state(simulation, 'Simulating…');
      try {
        renderSimulation(await api('POST', '/policies/simulate', { policies: [{ name: name.value.trim(), rego: rego.value }] }));
      } catch (e) {
        simulation.replaceChildren();
        showErrors(e);
      }
    });
  }
  load();
}
