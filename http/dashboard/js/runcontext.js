// What a policy saw of the run (CONTRACT §16): the run context a decision
// keeps, as facts and tables, for the decision and graph pages.

import { el } from './dom.js';

function facts(pairs) {
  return el('dl', { class: 'facts' }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== '').flatMap(([k, v]) =>
    [el('dt', { text: k }), el('dd', {}, v instanceof Node ? v : String(v))]));
}

function table(label, head, rows) {
  return el('table', {}, el('caption', { text: label }),
    el('thead', {}, el('tr', {}, head.map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) => el('td', {}, c instanceof Node ? c : String(c)))))));
}

function trustBadge(level) {
  if (!level) return '—';
  const bad = level === 'untrusted_external' || level === 'malicious_suspected';
  return el('span', { class: 'badge' + (bad ? ' HIGH' : ''), 'data-trust': level, text: level });
}

// renderRunContext draws ctx ({run, agent_history}: the members the
// tenant's policies read of the state before the call) into a panel; hash is
// the decision's context_hash.
export function renderRunContext(ctx, hash) {
  const r = ctx.run || {};
  const h = ctx.agent_history;
  const has = (k) => Object.prototype.hasOwnProperty.call(r, k);
  const t = r.trust || {};
  const w = r.window || {};
  const parts = [
    el('h2', { text: 'Run context: what the policy saw' }),
    el('p', { class: 'muted', text: 'The state of the run before this call, as far as the tenant\'s policies read it. Counts are of calls that reached the policy.' }),
    facts([
      ['Run', !has('id') ? null : r.id === null ? 'the agent\'s ambient run (no run id)' : el('code', { id: 'run-context-id', text: r.id })],
      ['Parent run', r.parent_id ? el('code', { text: r.parent_id }) : null],
      ['Earlier calls', has('totals') ? el('span', { id: 'run-context-calls', text: String(r.totals.calls) }) : null],
      ['Known', has('known') ? (r.known ? 'yes' : 'no: the run\'s first call') : null],
      ['Complete', has('complete') ? (r.complete ? 'yes' : 'no: the counts may miss calls from before a restart or a lost shared state') : null],
      ['Least trusted input', has('trust') ? el('span', { id: 'run-context-trust' }, trustBadge(t.min)) : null],
      ['Tainted since call', t.first_untrusted_seq],
      ['Labels', has('labels') ? (r.labels.join(', ') || '—') : null],
      ['Decisions', has('decisions') ? ['allow', 'deny', 'require_approval', 'redact', 'quarantine'].map((d) => d + ' ' + r.decisions[d]).join(', ') : null],
      ['Last 60 s / 1 h', has('window') ? w.w60s.calls + ' / ' + w.w1h.calls + ' calls' : null],
      ['Agent, last hour', h && h.window ? 'calls ' + h.window.w1h.calls + ', runs started ' + h.window.w1h.runs_started + ', denied ' + h.window.w1h.denies : null],
      ['Context hash', hash ? el('code', { id: 'run-context-hash', text: hash }) : null],
    ]),
  ];
  if ((t.sources || []).length) {
    parts.push(table('Where the run\'s trust came from', ['Level', 'Call', 'Tool', 'Via'],
      t.sources.map((s) => [trustBadge(s.level), s.seq || 'before the run', s.tool ? s.tool + '.' + s.action : '—', s.via])));
  }
  const tools = [];
  for (const [tool, actions] of Object.entries(r.tools || {})) {
    for (const [action, s] of Object.entries(actions)) tools.push([tool, action, s.attempts, s.allowed, s.since_last_s + ' s ago']);
  }
  if (tools.length) parts.push(table('Tools of the run', ['Tool', 'Action', 'Attempts', 'Allowed', 'Last'], tools));
  if (Object.keys(r.sums || {}).length) parts.push(table('Sums of the run', ['Parameter', 'Sum'], Object.entries(r.sums)));
  if ((r.recent || []).length) {
    parts.push(table('The run\'s latest calls', ['Call', 'Tool', 'Decision', 'Trust'],
      r.recent.map((c) => [c.seq, c.key, c.decision, trustBadge(c.trust)])));
  }
  const read = Object.keys(r).sort().join(', ');
  parts.push(el('p', { class: 'muted', id: 'run-context-read', text: 'The policies read ' + (read ? 'run: ' + read : 'nothing of the run') +
    (h ? '; agent history: ' + Object.keys(h).sort().join(', ') : '; not the agent\'s history') + '.' }));
  return el('section', { id: 'run-context', class: 'panel', 'aria-label': 'Run context' }, parts);
}
