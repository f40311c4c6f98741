// Agents: the tenant's agents with a status filter; for admins freeze,
// unfreeze, restore, revoke, the risk tier and token rotation (the new
// token shown once, with a copy button); each agent's graph one click away.

import { api, session } from '../api.js';
import { el, time, toast, state } from '../dom.js';

export const title = 'Agents';
export const path = '/agents';
export const level = 'viewer';

const transitions = { active: ['freeze', 'revoke'], frozen: ['unfreeze', 'revoke'], quarantined: ['restore', 'revoke'] };

export function render(main) {
  const filter = el('select', { id: 'agents-status' }, ['', 'active', 'frozen', 'quarantined', 'revoked'].map((v) => el('option', { value: v, text: v || 'all but deleted' })));
  const body = el('div', { id: 'agents-body' });
  const secret = el('div', { id: 'agents-secret', class: 'panel', hidden: true, role: 'alert' });
  main.replaceChildren(el('h1', { text: 'Agents' }),
    el('div', { class: 'panel inline-form' }, el('div', {}, el('label', { for: 'agents-status', text: 'Status' }), filter)), secret, body);
  const admin = session.can('admin');

  async function load() {
    state(body, 'Loading agents…');
    try {
      const rows = await api('GET', '/agents?limit=500' + (filter.value ? '&status=' + filter.value : ''));
      if (rows.length === 0) { state(body, 'No agents' + (filter.value ? ' with status ' + filter.value : '') + '.'); return; }
      body.replaceChildren(el('table', { 'aria-label': 'Agents' },
        el('thead', {}, el('tr', {}, ['Name', 'Status', 'Risk tier', 'Last seen', 'Registered', ''].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, rows.map(row))));
    } catch (e) {
      state(body, 'Could not load agents: ' + e.message, true);
    }
  }
  function row(a) {
    const actions = el('div', { class: 'row-actions' }, el('a', { href: '#/graph?kind=agent&id=' + encodeURIComponent(a.agent_id), text: 'Graph' }),
      el('button', { type: 'button', class: 'secondary permissions', text: 'Permissions', onclick: () => permissions(a) }));
    let tier = el('span', { text: a.risk_tier });
    if (admin) {
      for (const op of transitions[a.status] || []) {
        actions.append(el('button', { type: 'button', class: op === 'revoke' ? 'danger ' + op : 'secondary ' + op, text: op,
          onclick: () => act(a, op) }));
      }
      if (a.status !== 'revoked') actions.append(el('button', { type: 'button', class: 'secondary rotate', text: 'Rotate token', onclick: () => rotate(a) }));
      tier = el('select', { 'aria-label': 'Risk tier of ' + a.name, class: 'tier' }, ['low', 'medium', 'high'].map((v) => el('option', { value: v, text: v })));
      tier.value = a.risk_tier;
      tier.addEventListener('change', () => patch(a, { risk_tier: tier.value }));
    }
    return el('tr', { 'data-agent': a.agent_id },
      el('td', {}, el('strong', { text: a.name }), el('div', { class: 'muted', text: a.agent_id })),
      el('td', {}, el('span', { class: 'badge agent-status', text: a.status })), el('td', {}, tier),
      el('td', {}, time(a.last_seen_at)), el('td', {}, time(a.created_at)), el('td', {}, actions));
  }
  async function act(a, op) {
    try {
      await api('POST', '/agents/' + encodeURIComponent(a.agent_id) + '/' + op, {});
      toast(op + ': ' + a.name);
    } catch (e) { toast(e.message, true); }
    load();
  }
  async function patch(a, body) {
    try {
      await api('PATCH', '/agents/' + encodeURIComponent(a.agent_id), body);
      toast('Updated ' + a.name);
    } catch (e) { toast(e.message, true); load(); }
  }
  async function rotate(a) {
    try {
      const r = await api('POST', '/agents/' + encodeURIComponent(a.agent_id) + '/rotate-token', {});
      const code = el('code', { id: 'new-token', text: r.agent_token });
      const copy = el('button', { type: 'button', id: 'copy-token', class: 'secondary', text: 'Copy',
        onclick: async () => {
          try { await navigator.clipboard.writeText(r.agent_token); toast('Copied.'); } catch (e) { toast('Copy failed: select the token and copy it.', true); }
        } });
      secret.replaceChildren(el('p', {}, el('strong', { text: 'New token for ' + a.name + ' (shown once; the old one stopped working): ' })),
        el('p', {}, code, ' ', copy),
        el('button', { type: 'button', class: 'secondary', text: 'Done', onclick: () => { secret.hidden = true; secret.replaceChildren(); } }));
      secret.hidden = false;
    } catch (e) { toast(e.message, true); }
  }
  // permissions shows the agent's tool bindings (none: any tool), with
  // bind and unbind for admins.
  async function permissions(a) {
    const box = el('div', { class: 'panel', id: 'permissions', role: 'region', 'aria-label': 'Permissions of ' + a.name });
    const old = document.getElementById('permissions');
    if (old) old.remove();
    body.before(box);
    async function draw() {
      state(box, 'Loading permissions…');
      let rows;
      try {
        rows = await api('GET', '/agents/' + encodeURIComponent(a.agent_id) + '/permissions');
      } catch (e) { state(box, 'Could not load permissions: ' + e.message, true); return; }
      const list = rows.length === 0 ? el('p', { class: 'state', text: 'No bindings: ' + a.name + ' may call any tool.' })
        : el('ul', { id: 'permission-list' }, rows.map((p) => el('li', { 'data-tool': p.tool_key }, el('code', { text: p.tool_key }), ' ',
          admin ? el('button', { type: 'button', class: 'secondary unbind', text: 'Remove', onclick: () => unbind(p.tool_key) }) : null)));
      const tool = el('input', { id: 'bind-tool', spellcheck: 'false', required: true });
      const form = admin ? el('form', { class: 'inline-form' }, el('div', {}, el('label', { for: 'bind-tool', text: 'Tool to allow' }), tool),
        el('button', { type: 'submit', id: 'bind-save', text: 'Bind' })) : null;
      if (form) {
        form.addEventListener('submit', async (ev) => {
          ev.preventDefault();
          try {
            await api('POST', '/agents/' + encodeURIComponent(a.agent_id) + '/permissions', { tool_key: tool.value.trim() });
            toast('Bound ' + tool.value.trim() + ' to ' + a.name);
            draw();
          } catch (e) { toast(e.message, true); }
        });
      }
      box.replaceChildren(...[el('h2', { text: 'Permissions of ' + a.name }), list, form,
        el('button', { type: 'button', class: 'secondary', text: 'Close', onclick: () => box.remove() })].filter(Boolean));
    }
    async function unbind(tool) {
      try {
        await api('DELETE', '/agents/' + encodeURIComponent(a.agent_id) + '/permissions/' + encodeURIComponent(tool));
        toast('Removed ' + tool);
      } catch (e) { toast(e.message, true); }
      draw();
    }
    draw();
  }
  filter.addEventListener('change', load);
  load();
  return () => { secret.replaceChildren(); };
}
