// Detection rules: the default and the tenant's custom rules; admins create
// or update one with a JSON condition (validated by the gateway, its error
// shown as is) and backtest any rule over the last days with its figures.

import { api, session } from '../api.js';
import { el, state, toast } from '../dom.js';

export const title = 'Rules';
export const path = '/rules';
export const level = 'viewer';

export function render(main) {
  const body = el('div', { id: 'rules-body' });
  const result = el('div', { id: 'backtest-result', role: 'status' });
  const admin = session.can('admin');
  const form = admin ? createForm() : null;
  main.replaceChildren(...[el('h1', { text: 'Detection rules' }), form, result, body].filter(Boolean));

  async function load() {
    state(body, 'Loading rules…');
    try {
      const rows = await api('GET', '/soc/rules');
      body.replaceChildren(el('table', { 'aria-label': 'Detection rules' },
        el('thead', {}, el('tr', {}, ['Rule', 'Severity', 'Source', 'Condition', ''].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, rows.map((r) => el('tr', { 'data-rule': r.rule_key },
          el('td', {}, el('strong', { text: r.rule_key }), r.description ? el('div', { class: 'muted', text: r.description }) : null),
          el('td', {}, el('span', { class: 'badge', text: r.severity })), el('td', { text: r.source }),
          el('td', {}, el('code', { class: 'condition', text: JSON.stringify(r.condition) })),
          el('td', {}, admin ? el('button', { type: 'button', class: 'secondary backtest', text: 'Backtest 7 days', onclick: () => backtest(r.rule_key) }) : null))))));
    } catch (e) {
      state(body, 'Could not load rules: ' + e.message, true);
    }
  }
  async function backtest(key) {
    state(result, 'Backtesting ' + key + '…');
    try {
      const b = await api('POST', '/soc/rules/' + encodeURIComponent(key) + '/backtest', {});
      result.replaceChildren(el('div', { class: 'panel', id: 'backtest-figures' },
        el('p', {}, el('strong', { text: key + ': ' }), b.match_count + ' matches among ' + b.decisions_scanned + ' decisions scanned; about ' +
          b.estimated_daily_alert_volume + ' alerts a day.')));
    } catch (e) {
      state(result, 'Backtest failed: ' + e.message, true);
    }
  }
  function createForm() {
    const key = el('input', { id: 'rule-key', required: true, spellcheck: 'false' });
    const sev = el('select', { id: 'rule-severity' }, ['INFO', 'LOW', 'MEDIUM', 'HIGH'].map((v) => el('option', { value: v, text: v })));
    const cond = el('textarea', { id: 'rule-condition', rows: '3', cols: '60', spellcheck: 'false', text: '{"field": "decision", "equals": "deny"}' });
    const error = el('p', { id: 'rule-error', class: 'error', role: 'alert' });
    const f = el('form', { class: 'panel', 'aria-label': 'Create or update a rule' },
      el('label', { for: 'rule-key', text: 'Rule key' }), key,
      el('label', { for: 'rule-severity', text: 'Severity' }), sev,
      el('label', { for: 'rule-condition', text: 'Condition (JSON)' }), cond, error,
      el('button', { type: 'submit', id: 'rule-save', text: 'Save rule' }));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      error.textContent = '';
      let condition;
      try { condition = JSON.parse(cond.value); } catch (e) { error.textContent = 'The condition is not JSON: ' + e.message; return; }
      try {
        await api('POST', '/soc/rules', { rule_key: key.value.trim(), severity: sev.value, condition });
        toast('Saved rule ' + key.value.trim());
        load();
      } catch (e) {
        error.textContent = e.message;
      }
    });
    return f;
  }
  load();
}
