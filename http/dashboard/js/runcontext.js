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

// renderRunContext draws ctx ({run, agent_history}, the state before the
// call) into a panel; hash is the decision's context_hash.
export function renderRunContext(ctx, hash) {
  const r = ctx.run || {};
  const h = ctx.agent_history || {};
  const t = r.trust || {};
  const tools = [];
  for (const [tool, actions] of Object.entries(r.tools || {})) {
    for (const [action, s] of Object.entries(actions)) tools.push([tool, action, s.attempts, s.allowed, s.since_last_s + ' s ago']);
  }
  const w = r.window || {};
  const hw = h.window || {};
  const parts = [
    el('h2', { text: 'Run context: what the policy saw' }),
    el('p', { class: 'muted', text: 'The state of the run before this call. Counts are of calls that reached the policy.' }),
    facts([
      ['Run', r.id === null ? 'the agent\'s ambient run (no run id)' : el('code', { id: 'run-context-id', text: r.id })],
      ['Parent run', r.parent_id ? el('code', { text: r.parent_id }) : null],
      ['Earlier calls', el('span', { id: 'run-context-calls', text: String((r.totals || {}).calls ?? 0) })],
      ['Known', r.known ? 'yes' : 'no: the run\'s first call'],
      ['Complete', r.complete ? 'yes' : 'no: the counts may miss calls from before a restart or a lost shared state'],
      ['Least trusted input', el('span', { id: 'run-context-trust' }, trustBadge(t.min))],
      ['Tainted since call', t.first_untrusted_seq],
      ['Labels', (r.labels || []).join(', ') || '—'],
      ['Decisions', ['allow', 'deny', 'require_approval', 'redact', 'quarantine'].map((d) => d + ' ' + ((r.decisions || {})[d] ?? 0)).join(', ')],
      ['Last 60 s / 1 h', ((w.w60s || {}).calls ?? 0) + ' / ' + ((w.w1h || {}).calls ?? 0) + ' calls'],
      ['Agent, last hour', 'calls ' + ((hw.w1h || {}).calls ?? 0) + ', runs started ' + ((hw.w1h || {}).runs_started ?? 0) + ', denied ' + ((hw.w1h || {}).denies ?? 0)],
      ['Context hash', hash ? el('code', { id: 'run-context-hash', text: hash }) : null],
    ]),
  ];
  if ((t.sources || []).length) {
    parts.push(table('Where the run\'s trust came from', ['Level', 'Call', 'Tool', 'Via'],
      t.sources.map((s) => [trustBadge(s.level), s.seq || 'before the run', s.tool ? s.tool + '.' + s.action : '—', s.via])));
  }
  if (tools.length) parts.push(table('Tools of the run', ['Tool', 'Action', 'Attempts', 'Allowed', 'Last'], tools));
  if (Object.keys(r.sums || {}).length) parts.push(table('Sums of the run', ['Parameter', 'Sum'], Object.entries(r.sums)));
  if ((r.recent || []).length) {
    parts.push(table('The run\'s latest calls', ['Call', 'Tool', 'Decision', 'Trust'],
      r.recent.map((c) => [c.seq, c.key, c.decision, trustBadge(c.trust)])));
  }
  return el('section', { id: 'run-context', class: 'panel', 'aria-label': 'Run context' }, parts);
}
