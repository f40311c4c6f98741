// Live feed: the tenant's security events, alerts and incidents as they
// happen (GET /v2/ws/events with a stream ticket), with pause, filters by
// type, severity and agent, and a reconnect that keeps the list, the
// filters, the pause and the scroll position.
//
// The newest 10,000 items are kept and the list is virtualised: rows have
// one fixed height (ROW, the .feed-item height in app.css) and only those
// in view, plus a margin, are in the page, so drawing costs the same with
// ten items or ten thousand. Frames are taken in batches, once per
// animation frame, however fast they come.

import { el, time } from '../dom.js';
import { openFeed } from '../stream.js';

export const title = 'Live feed';
export const path = '/feed';
export const level = 'viewer';

const KEEP = 10000;
const ROW = 32; // px: .feed-item's height in app.css
const MARGIN = 10; // rows drawn above and below the view

export function render(main) {
  let items = []; // oldest first, at most KEEP
  let shown = []; // the items that pass the filters, oldest first
  let incoming = []; // arrived since the last animation frame
  let held = []; // arrived while paused
  let paused = false;
  let seq = 0;
  const type = el('select', { id: 'feed-type' }, ['', 'event', 'alert', 'incident'].map((v) => el('option', { value: v, text: v || 'all' })));
  const severity = el('select', { id: 'feed-severity' }, ['', 'INFO', 'LOW', 'MEDIUM', 'HIGH'].map((v) => el('option', { value: v, text: v || 'all' })));
  const agent = el('input', { id: 'feed-agent', placeholder: 'agent id', spellcheck: 'false' });
  const pause = el('button', { type: 'button', id: 'feed-pause', class: 'secondary', 'aria-pressed': 'false', text: 'Pause' });
  const status = el('p', { id: 'feed-status', class: 'state', role: 'status', text: 'Connecting…' });
  const count = el('p', { id: 'feed-count', class: 'muted' });
  const list = el('ol', { id: 'feed-list', class: 'feed-rows' });
  const view = el('div', { id: 'feed-view', class: 'feed', tabindex: '0', role: 'region', 'aria-label': 'Live feed items, newest first' }, list);
  main.replaceChildren(el('h1', { text: 'Live feed' }),
    el('div', { class: 'panel inline-form' },
      el('div', {}, el('label', { for: 'feed-type', text: 'Type' }), type),
      el('div', {}, el('label', { for: 'feed-severity', text: 'Severity' }), severity),
      el('div', {}, el('label', { for: 'feed-agent', text: 'Agent' }), agent),
      pause),
    status, count, view);

  // filters reads the controls once; matches tests an item against them.
  function filters() {
    return { type: type.value, severity: severity.value, agent: agent.value.trim() };
  }
  function matches(f, q) {
    const d = f.data || {};
    const sev = d.severity || (d.decision === 'deny' ? 'HIGH' : 'INFO');
    return (!q.type || f.type === q.type) && (!q.severity || sev === q.severity) && (!q.agent || d.agent_id === q.agent);
  }
  function describe(f) {
    const d = f.data || {};
    if (f.type === 'event') return d.kind + ': ' + (d.decision || '') + ' ' + (d.tool || '') + '.' + (d.action || '') + (d.reason ? ' (' + d.reason + ')' : '');
    if (f.type === 'alert') return 'alert ' + d.severity + ' ' + d.alert_name + ': ' + d.summary;
    return 'incident ' + d.severity + ' ' + d.kind + ': ' + d.summary;
  }
  function line(f, pos, total) {
    const d = f.data || {};
    const what = describe(f);
    return el('li', { class: 'feed-item ' + f.type, 'data-type': f.type, 'data-decision': d.decision || null, 'data-kind': d.kind || null,
      'data-id': d.event_id || d.alert_id || d.incident_id || null,
      'aria-posinset': String(pos), 'aria-setsize': String(total), title: what },
    time(d.occurred_at || d.created_at || d.opened_at), ' ', el('span', { class: 'badge', text: f.type }), ' ', what,
    d.agent_id ? el('span', { class: 'muted', text: ' · agent ' + d.agent_id }) : null);
  }

  // take adds a batch of frames, drops the oldest beyond KEEP, and keeps
  // the rows in view where they are when the operator has scrolled down.
  function take(batch) {
    let added = 0;
    const q = filters();
    for (const f of batch) {
      f.seq = seq++;
      items.push(f);
      if (matches(f, q)) { shown.push(f); added++; }
    }
    if (items.length > KEEP) {
      items = items.slice(items.length - KEEP);
      const oldest = items[0].seq;
      let k = 0;
      while (k < shown.length && shown[k].seq < oldest) k++;
      if (k) shown = shown.slice(k);
    }
    if (view.scrollTop > 0 && added) {
      list.style.height = shown.length * ROW + 'px';
      view.scrollTop += added * ROW;
    }
  }
  function draw() {
    const total = shown.length;
    list.style.height = total * ROW + 'px';
    count.textContent = items.length ? total.toLocaleString() + ' of ' + items.length.toLocaleString() +
      ' items shown (the newest ' + KEEP.toLocaleString() + ' are kept)' : '';
    count.dataset.shown = String(total);
    count.dataset.kept = String(items.length);
    count.dataset.received = String(seq);
    if (total === 0) {
      list.style.paddingTop = '0';
      list.replaceChildren(el('li', { class: 'state', text: items.length ? 'Nothing matches the filters.' : 'Waiting for events…' }));
      return;
    }
    const first = Math.max(0, Math.floor(view.scrollTop / ROW) - MARGIN);
    const last = Math.min(total, Math.ceil((view.scrollTop + view.clientHeight) / ROW) + MARGIN);
    list.style.paddingTop = first * ROW + 'px';
    const rows = [];
    for (let i = first; i < last; i++) rows.push(line(shown[total - 1 - i], i + 1, total));
    list.replaceChildren(...rows);
  }
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (incoming.length) { const batch = incoming; incoming = []; take(batch); }
      draw();
    });
  }
  function refilter() {
    const q = filters();
    shown = items.filter((f) => matches(f, q));
    view.scrollTop = 0;
    schedule();
  }
  const feed = openFeed((f) => {
    if (paused) {
      held.push(f);
      if (held.length > KEEP) held = held.slice(held.length - KEEP);
      pause.textContent = 'Resume (' + held.length + ' new)';
      return;
    }
    incoming.push(f);
    schedule();
  }, (st, msg) => {
    status.className = st === 'error' ? 'state error' : 'state';
    status.textContent = st === 'open' ? 'Live.' + (msg ? ' ' + msg + ' Items from the break are not in this list; the audit log has them.' : '') : msg;
  });
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'Resume' : 'Pause';
    pause.setAttribute('aria-pressed', String(paused));
    if (!paused) {
      incoming = incoming.concat(held);
      held = [];
      schedule();
    }
  });
  for (const c of [type, severity]) c.addEventListener('change', refilter);
  agent.addEventListener('input', refilter);
  view.addEventListener('scroll', schedule, { passive: true });
  draw();
  return () => feed.close();
}
