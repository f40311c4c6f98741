// Live feed: the tenant's security events, alerts and incidents as they
// happen (GET /v2/ws/events with a stream ticket), with pause, filters by
// type, severity and agent, and a reconnect that keeps the list, the
// filters and the pause. At most 10,000 items are kept and the newest 300
// that pass the filters are drawn, so the page stays responsive.

import { el, time } from '../dom.js';
import { openFeed } from '../stream.js';

export const title = 'Live feed';
export const path = '/feed';
export const level = 'viewer';

const KEEP = 10000;
const SHOW = 300;

export function render(main) {
  const items = [];
  let paused = false;
  let held = 0;
  const type = el('select', { id: 'feed-type' }, ['', 'event', 'alert', 'incident'].map((v) => el('option', { value: v, text: v || 'all' })));
  const severity = el('select', { id: 'feed-severity' }, ['', 'INFO', 'LOW', 'MEDIUM', 'HIGH'].map((v) => el('option', { value: v, text: v || 'all' })));
  const agent = el('input', { id: 'feed-agent', placeholder: 'agent id', spellcheck: 'false' });
  const pause = el('button', { type: 'button', id: 'feed-pause', class: 'secondary', 'aria-pressed': 'false', text: 'Pause' });
  const status = el('p', { id: 'feed-status', class: 'state', role: 'status', text: 'Connecting…' });
  const list = el('ol', { id: 'feed-list', class: 'feed', 'aria-label': 'Live feed items, newest first' });
  main.replaceChildren(el('h1', { text: 'Live feed' }),
    el('div', { class: 'panel inline-form' },
      el('div', {}, el('label', { for: 'feed-type', text: 'Type' }), type),
      el('div', {}, el('label', { for: 'feed-severity', text: 'Severity' }), severity),
      el('div', {}, el('label', { for: 'feed-agent', text: 'Agent' }), agent),
      pause),
    status, list);

  function matches(f) {
    const d = f.data || {};
    const sev = d.severity || (d.decision === 'deny' ? 'HIGH' : 'INFO');
    return (!type.value || f.type === type.value) && (!severity.value || sev === severity.value) &&
      (!agent.value.trim() || d.agent_id === agent.value.trim());
  }
  function line(f) {
    const d = f.data || {};
    let what;
    if (f.type === 'event') what = d.kind + ': ' + (d.decision || '') + ' ' + (d.tool || '') + '.' + (d.action || '') + (d.reason ? ' (' + d.reason + ')' : '');
    else if (f.type === 'alert') what = 'alert ' + d.severity + ' ' + d.alert_name + ': ' + d.summary;
    else what = 'incident ' + d.severity + ' ' + d.kind + ': ' + d.summary;
    return el('li', { class: 'feed-item ' + f.type, 'data-type': f.type, 'data-decision': d.decision || null, 'data-kind': d.kind || null },
      time(d.occurred_at || d.created_at || d.opened_at), ' ', el('span', { class: 'badge', text: f.type }), ' ', what,
      d.agent_id ? el('span', { class: 'muted', text: ' · agent ' + d.agent_id }) : null);
  }
  function draw() {
    const shown = [];
    for (let i = items.length - 1; i >= 0 && shown.length < SHOW; i--) {
      if (matches(items[i])) shown.push(line(items[i]));
    }
    list.replaceChildren(...shown);
    if (shown.length === 0) list.replaceChildren(el('li', { class: 'state', text: items.length ? 'Nothing matches the filters.' : 'Waiting for events…' }));
  }
  let pending = false;
  function schedule() {
    if (pending || paused) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }
  const feed = openFeed((f) => {
    items.push(f);
    if (items.length > KEEP) items.splice(0, items.length - KEEP);
    if (paused) { held++; pause.textContent = 'Resume (' + held + ' new)'; } else schedule();
  }, (st, msg) => {
    status.className = st === 'error' ? 'state error' : 'state';
    status.textContent = st === 'open' ? 'Live.' : st === 'reconnecting' ? 'Connection lost; reconnecting… (the list is kept)' : msg;
  });
  pause.addEventListener('click', () => {
    paused = !paused;
    held = 0;
    pause.textContent = paused ? 'Resume' : 'Pause';
    pause.setAttribute('aria-pressed', String(paused));
    if (!paused) schedule();
  });
  for (const c of [type, severity]) c.addEventListener('change', schedule);
  agent.addEventListener('input', schedule);
  draw();
  return () => feed.close();
}
