// Small DOM helpers: elements built with textContent (never innerHTML, so
// no server text becomes markup), times in local time with UTC on hover,
// and the toast.

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// local formats in the viewer's locale and time zone; made once, as each
// Date.toLocaleString call builds a formatter anew (the feed draws dozens
// of rows per frame).
const local = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });

// time shows an RFC 3339 timestamp in the viewer's local time, UTC on hover.
export function time(iso) {
  if (!iso) return el('span', { class: 'muted', text: '—' });
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return el('span', { text: iso });
  return el('time', { datetime: iso, title: d.toISOString() + ' (UTC)', text: local.format(d) });
}

export function toast(message, isError = false) {
  const box = document.getElementById('toast');
  const p = el('p', { class: isError ? 'error' : '', text: message });
  box.append(p);
  setTimeout(() => p.remove(), isError ? 9000 : 4000);
}

// state renders a loading, empty or error line in place of a view's body.
export function state(target, text, isError = false) {
  target.replaceChildren(el('p', { class: isError ? 'state error' : 'state', role: isError ? 'alert' : null, text }));
}
