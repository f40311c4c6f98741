// MCP servers: the registry (CONTRACT §8). The list with each server's
// status, trust level, inspection and drift; for admins register, discover
// (an http server over MCP, a stdio server from a pasted manifest),
// quarantine, restore, pin and remove. A server's page shows its tools
// (approve and disable, with what the poisoning scan found) and its drift
// history with the findings: categories and counts, never the text.

import { api, session } from '../api.js';
import { el, time, toast, state } from '../dom.js';

export const title = 'MCP';
export const path = '/mcp';
export const level = 'viewer';

const enc = encodeURIComponent;

function findings(list) {
  if (!list || list.length === 0) return el('span', { class: 'muted', text: 'none' });
  return el('ul', { class: 'findings' }, list.map((f) =>
    el('li', { 'data-category': f.category }, el('span', { class: 'badge HIGH', text: f.category }), ' ×' + f.count + (f.tool ? ' in ' + f.tool : ''))));
}

export function render(main, params) {
  const key = params.get('server');
  return key ? server(main, key) : list(main);
}

function list(main) {
  const body = el('div', { id: 'mcp-body' });
  const admin = session.can('admin');
  main.replaceChildren(el('h1', { text: 'MCP servers' }), admin ? register() : null, body);

  function register() {
    const key = el('input', { id: 'mcp-key', required: true, pattern: '[a-z0-9_\\-]{1,64}', spellcheck: 'false' });
    const transport = el('select', { id: 'mcp-transport' }, ['http', 'stdio'].map((v) => el('option', { value: v, text: v })));
    const url = el('input', { id: 'mcp-url', type: 'url', placeholder: 'https://mcp.example.com/mcp', spellcheck: 'false' });
    const error = el('p', { id: 'mcp-error', class: 'error', role: 'alert' });
    const form = el('form', { class: 'panel inline-form', 'aria-label': 'Register an MCP server' },
      el('div', {}, el('label', { for: 'mcp-key', text: 'Server key' }), key),
      el('div', {}, el('label', { for: 'mcp-transport', text: 'Transport' }), transport),
      el('div', {}, el('label', { for: 'mcp-url', text: 'URL (http)' }), url),
      el('button', { type: 'submit', id: 'mcp-register', text: 'Register' }), error);
    transport.addEventListener('change', () => { url.disabled = transport.value !== 'http'; });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      error.textContent = '';
      const b = { server_key: key.value.trim(), transport: transport.value };
      if (transport.value === 'http') b.url = url.value.trim();
      try {
        await api('POST', '/mcp/servers', b);
        toast('Registered ' + b.server_key + '; discover it to list its tools.');
        key.value = '';
        url.value = '';
        load();
      } catch (e) {
        error.textContent = e.message;
      }
    });
    return form;
  }
  async function load() {
    state(body, 'Loading MCP servers…');
    try {
      const rows = await api('GET', '/mcp/servers');
      if (rows.length === 0) { state(body, 'No MCP servers. Every mcp: tool is denied until its server is registered, discovered and the tool approved.'); return; }
      body.replaceChildren(el('table', { 'aria-label': 'MCP servers' },
        el('thead', {}, el('tr', {}, ['Server', 'Status', 'Trust', 'Inspection', 'Manifest', 'Last discovery'].map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, rows.map((s) => el('tr', { 'data-server': s.server_key },
          el('td', {}, el('a', { href: '#/mcp?server=' + enc(s.server_key), text: s.server_key }), el('div', { class: 'muted', text: s.transport + (s.url ? ' · ' + s.url : '') })),
          el('td', {}, el('span', { class: 'badge ' + (s.status === 'active' ? 'APPROVED' : 'REJECTED'), text: s.status })),
          el('td', { text: s.trust_level }),
          el('td', { text: s.inspection_enabled ? 'on' : 'off' }),
          el('td', {}, s.drifted ? el('span', { class: 'badge HIGH drifted', text: 'drifted' }) : s.pinned_hash ? el('span', { class: 'muted', text: 'pinned' }) : el('span', { class: 'muted', text: 'not discovered' })),
          el('td', {}, time(s.last_discovery_at), s.last_discovery_error ? el('div', { class: 'error', text: s.last_discovery_error }) : null))))));
    } catch (e) {
      state(body, 'Could not load MCP servers: ' + e.message, true);
    }
  }
  load();
  return null;
}

function server(main, key) {
  const head = el('div', { id: 'mcp-server' });
  const tools = el('div', { id: 'mcp-tools' });
  const history = el('div', { id: 'mcp-history' });
  // The last discovery's outcome stays while the page reloads around it.
  const result = el('p', { id: 'discover-result', role: 'status' });
  const admin = session.can('admin');
  main.replaceChildren(el('p', {}, el('a', { href: '#/mcp', text: '← MCP servers' })), el('h1', { text: 'MCP server ' + key }), head, result,
    el('h2', { text: 'Tools' }), tools, el('h2', { text: 'Drift history' }), history);
  const base = '/mcp/servers/' + enc(key);

  async function run(label, method, suffix, body) {
    try {
      const out = await api(method, base + suffix, body);
      toast(label);
      load();
      return out;
    } catch (e) {
      toast(e.message, true);
      load();
      return null;
    }
  }
  function actions(s) {
    if (!admin) return null;
    const box = el('div', { class: 'panel row-actions', id: 'mcp-actions' });
    let manifest = null;
    if (s.transport === 'stdio') {
      manifest = el('textarea', { id: 'mcp-manifest', rows: '5', cols: '60', spellcheck: 'false', 'aria-label': 'Manifest of ' + key,
        text: '{"tools": [{"name": "", "description": "", "inputSchema": {"type": "object"}}]}' });
    }
    box.append(el('button', { type: 'button', id: 'mcp-discover', text: 'Discover', onclick: async () => {
      let body;
      if (manifest) {
        try { body = JSON.parse(manifest.value); } catch (e) { result.textContent = 'The manifest is not JSON: ' + e.message; return; }
      }
      result.textContent = 'Discovering…';
      const d = await run('Discovered ' + key, 'POST', '/discover', body);
      if (!d) { result.textContent = 'The discovery failed; see the server\'s last error above.'; return; }
      result.textContent = d.first ? 'First discovery: ' + d.tools + ' tools pinned, every one pending approval.'
        : d.history_id ? 'Drift: ' + d.added.length + ' added, ' + d.removed.length + ' removed, ' + d.changed.length + ' changed; risk ' + d.risk_score + '.'
          : 'No drift: ' + d.tools + ' tools, as before.';
    } }));
    if (s.status === 'active') box.append(el('button', { type: 'button', class: 'danger', id: 'mcp-quarantine', text: 'Quarantine', onclick: () => run('Quarantined ' + key, 'POST', '/quarantine') }));
    else box.append(el('button', { type: 'button', class: 'secondary', id: 'mcp-restore', text: 'Restore', onclick: () => run('Restored ' + key, 'POST', '/restore') }));
    if (s.drifted) box.append(el('button', { type: 'button', class: 'secondary', id: 'mcp-pin', text: 'Pin this manifest', onclick: () => run('Pinned the current manifest', 'POST', '/pin') }));
    const inspection = el('input', { type: 'checkbox', id: 'mcp-inspection', checked: s.inspection_enabled });
    inspection.addEventListener('change', () => run('Inspection ' + (inspection.checked ? 'on' : 'off'), 'PATCH', '', { inspection_enabled: inspection.checked }));
    box.append(el('label', { for: 'mcp-inspection', class: 'check' }, inspection, ' Inspect responses'));
    box.append(el('button', { type: 'button', class: 'danger', id: 'mcp-delete', text: 'Remove', onclick: async () => {
      try { await api('DELETE', base); toast('Removed ' + key); location.hash = '#/mcp'; } catch (e) { toast(e.message, true); }
    } }));
    return el('div', {}, box, manifest);
  }
  async function load() {
    try {
      const [s, ts, hs] = await Promise.all([api('GET', base), api('GET', base + '/tools'), api('GET', base + '/manifest-history?limit=50')]);
      head.replaceChildren(el('dl', { class: 'panel facts' },
        el('dt', { text: 'Transport' }), el('dd', { text: s.transport + (s.url ? ' · ' + s.url : '') }),
        el('dt', { text: 'Status' }), el('dd', { id: 'mcp-status', text: s.status }),
        el('dt', { text: 'Trust level' }), el('dd', { text: s.trust_level }),
        s.proxy_path ? el('dt', { text: 'MCP proxy URL' }) : null,
        s.proxy_path ? el('dd', {}, el('code', { id: 'mcp-proxy-url', text: location.origin + s.proxy_path }),
          el('span', { class: 'muted', text: s.upstream_headers_set ? ' · upstream credentials set' : ' · no upstream credentials' })) : null,
        el('dt', { text: 'Pinned manifest' }), el('dd', {}, el('code', { text: s.pinned_hash || '—' }), s.drifted ? el('span', { class: 'badge HIGH', text: ' drifted' }) : null),
        el('dt', { text: 'Last discovery' }), el('dd', {}, time(s.last_discovery_at), s.last_discovery_error ? el('div', { class: 'error', text: s.last_discovery_error }) : null)),
      actions(s));
      if (ts.length === 0) state(tools, 'No tools yet: discover the server.');
      else {
        tools.replaceChildren(el('table', { 'aria-label': 'Tools of ' + key },
          el('thead', {}, el('tr', {}, ['Tool', 'Status', 'Description', 'Findings', ''].map((h) => el('th', { scope: 'col', text: h })))),
          el('tbody', {}, ts.map((t) => el('tr', { 'data-tool': t.tool_key },
            el('td', {}, el('code', { text: t.name })),
            el('td', {}, el('span', { class: 'badge tool-status ' + (t.status === 'approved' ? 'APPROVED' : t.status === 'disabled' ? 'REJECTED' : 'PENDING'), text: t.status })),
            el('td', { class: 'description', text: t.description }),
            el('td', {}, findings(t.findings)),
            el('td', {}, admin ? el('div', { class: 'row-actions' },
              t.status !== 'approved' ? el('button', { type: 'button', class: 'approve', text: 'Approve', 'aria-label': 'Approve ' + t.name,
                onclick: () => run('Approved ' + t.name, 'POST', '/tools/' + enc(t.tool_key) + '/approve') }) : null,
              t.status !== 'disabled' ? el('button', { type: 'button', class: 'secondary disable', text: 'Disable', 'aria-label': 'Disable ' + t.name,
                onclick: () => run('Disabled ' + t.name, 'POST', '/tools/' + enc(t.tool_key) + '/disable') }) : null) : null))))));
      }
      if (hs.length === 0) state(history, 'No drift: the manifest is as pinned.');
      else {
        history.replaceChildren(el('table', { 'aria-label': 'Drift history of ' + key },
          el('thead', {}, el('tr', {}, ['Found', 'Risk', 'Added', 'Removed', 'Changed', 'Findings'].map((h) => el('th', { scope: 'col', text: h })))),
          el('tbody', {}, hs.map((h) => el('tr', { 'data-history': h.id },
            el('td', {}, time(h.discovered_at)),
            el('td', {}, el('span', { class: 'badge ' + (h.risk_score >= 75 ? 'HIGH' : h.risk_score >= 40 ? 'MEDIUM' : ''), text: String(h.risk_score) })),
            el('td', { text: h.added.join(', ') || '—' }), el('td', { text: h.removed.join(', ') || '—' }), el('td', { text: h.changed.join(', ') || '—' }),
            el('td', {}, findings(h.findings)))))));
      }
    } catch (e) {
      state(head, 'Could not load ' + key + ': ' + e.message, true);
    }
  }
  state(head, 'Loading…');
  load();
  return null;
}
