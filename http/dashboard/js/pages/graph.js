// Evidence graph of a run, an agent (with depth) or an incident, drawn
// with the vendored vis-network: node groups styled apart, a decision's
// risk and reason on hover, and a click showing the node's record.

import { Network, DataSet } from '../../vendor/vis-network/vis-network.esm.min.js';
import { api } from '../api.js';
import { el, state } from '../dom.js';
import { renderRunContext } from '../runcontext.js';

export const title = 'Evidence graph';
export const path = '/graph';
export const level = 'viewer';

const groups = {
  agent: { shape: 'box', color: { background: '#1f5fbf', border: '#174a94' }, font: { color: '#fff' } },
  run: { shape: 'ellipse', color: { background: '#e6eefb', border: '#1f5fbf' } },
  tool_call: { shape: 'box', color: { background: '#ffffff', border: '#5b6473' } },
  decision: { shape: 'diamond', size: 14, color: { background: '#f3c969', border: '#9a6700' } },
  approval: { shape: 'triangle', size: 12, color: { background: '#dcf3e1', border: '#1e7b34' } },
  receipt: { shape: 'square', size: 10, color: { background: '#d9dde3', border: '#5b6473' } },
  incident: { shape: 'star', size: 18, color: { background: '#f9dedc', border: '#b3261e' } },
  policy: { shape: 'hexagon', size: 12, color: { background: '#efe3fb', border: '#6b3fa0' } },
  mcp_server: { shape: 'database', color: { background: '#e8ebf0', border: '#5b6473' } },
};

export function render(main, params) {
  const kind = el('select', { id: 'graph-kind' }, ['run', 'agent', 'incident'].map((k) => el('option', { value: k, text: k })));
  const id = el('input', { id: 'graph-id', required: true, spellcheck: 'false' });
  const depth = el('select', { id: 'graph-depth' }, [1, 2, 3].map((d) => el('option', { value: String(d), text: String(d) })));
  depth.value = '3';
  kind.value = params.get('kind') || 'run';
  id.value = params.get('id') || '';
  const status = el('div', { id: 'graph-status' });
  const canvas = el('div', { id: 'graph', role: 'img', 'aria-label': 'Evidence graph' });
  const details = el('pre', { id: 'graph-details', class: 'details', hidden: true });
  const context = el('div', { id: 'graph-context' });
  const form = el('form', { class: 'panel inline-form' },
    el('div', {}, el('label', { for: 'graph-kind', text: 'Of a' }), kind),
    el('div', {}, el('label', { for: 'graph-id', text: 'Id' }), id),
    el('div', {}, el('label', { for: 'graph-depth', text: 'Depth (agent)' }), depth),
    el('button', { type: 'submit', id: 'graph-draw', text: 'Draw' }));
  main.replaceChildren(el('h1', { text: 'Evidence graph' }), form, status, canvas, context, details);
  let network = null;

  async function draw() {
    const v = id.value.trim();
    if (!v) { state(status, 'Enter a run id, an agent id or an incident id.'); return; }
    state(status, 'Loading the graph…');
    const q = kind.value === 'agent' ? '?depth=' + depth.value : '';
    let g;
    try {
      g = await api('GET', '/graph/' + kind.value + '/' + encodeURIComponent(v) + q);
    } catch (e) {
      state(status, 'Could not draw the graph: ' + e.message, true);
      return;
    }
    if (network) { network.destroy(); network = null; }
    const nodes = new DataSet(g.nodes.map((n) => ({ id: n.id, group: n.group, label: short(n), title: hover(n), record: n })));
    const edges = new DataSet(g.edges.map((e, i) => ({ id: 'e' + i, from: e.from, to: e.to, label: e.label, arrows: 'to', font: { size: 10 } })));
    network = new Network(canvas, { nodes, edges }, { groups, physics: { stabilization: { iterations: 150 } }, interaction: { hover: true, keyboard: true } });
    canvas.dataset.nodes = String(g.nodes.length);
    canvas.dataset.edges = String(g.edges.length);
    status.replaceChildren(el('p', { class: 'state', id: 'graph-count', text: g.nodes.length + ' nodes, ' + g.edges.length + ' edges. Click a node for its record.' }));
    network.on('click', (p) => { if (p.nodes.length) show(nodes.get(p.nodes[0]).record); });
    if (kind.value === 'run') latestContext(g.nodes);
    else context.replaceChildren();
  }

  // latestContext shows the run context of the run's newest decision: what
  // the policy saw of the run before its latest call.
  async function latestContext(all) {
    const ds = all.filter((n) => n.group === 'decision').sort((a, b) => (a.timestamp < b.timestamp ? 1 : -1));
    context.replaceChildren();
    if (!ds.length) return;
    try {
      const d = await api('GET', '/decisions/' + encodeURIComponent(ds[0].id.split(':').slice(1).join(':')));
      if (d.run_context) {
        context.replaceChildren(el('p', { class: 'muted', text: 'As of the run\'s latest decision (' + d.decision + ' ' + d.tool + '.' + d.action + '):' }),
          renderRunContext(d.run_context, d.context_hash));
      }
    } catch (e) {
      state(context, 'Could not load the run context: ' + e.message, true);
    }
  }

  async function show(n) {
    details.hidden = false;
    const [type, ...rest] = n.id.split(':');
    const rid = rest.join(':');
    const path = type === 'decision' || type === 'tool_call' ? '/decisions/' + encodeURIComponent(rid)
      : type === 'receipt' ? '/receipts/' + encodeURIComponent(rid) + '/verify'
        : type === 'approval' ? '/approvals/' + encodeURIComponent(rid) : null;
    details.textContent = JSON.stringify(n, null, 2);
    if (!path) return;
    try {
      const rec = await api('GET', path);
      details.textContent = JSON.stringify(rec, null, 2);
      if (type === 'decision' && rec.run_context) {
        context.replaceChildren(el('p', {}, el('a', { href: '#/decisions?id=' + encodeURIComponent(rid), text: 'Open this decision' })),
          renderRunContext(rec.run_context, rec.context_hash));
      }
    } catch (e) {
      details.textContent = 'Could not load the record: ' + e.message;
    }
  }

  form.addEventListener('submit', (ev) => { ev.preventDefault(); draw(); });
  if (id.value) draw();
  return () => { if (network) network.destroy(); };
}

function short(n) {
  return n.label.length > 24 ? n.label.slice(0, 22) + '…' : n.label;
}

// hover is a plain-text title (vis-network shows a string as text).
function hover(n) {
  const lines = [n.group + ': ' + n.label, new Date(n.timestamp).toLocaleString() + ' (' + n.timestamp + ')'];
  if (n.metadata) lines.push('risk ' + n.metadata.risk_score + ', reason ' + n.metadata.reason);
  return lines.join('\n');
}
