// Live lists: a watch=true list kept current. The stream sends only the
// rows created after it starts, so the list is read each time the stream
// (re)opens and nothing created in between is missed; rows are merged by
// id and only the newest `keep` are kept.

import { api } from './api.js';
import { watch } from './stream.js';

// liveRows reads and watches path (a list route with its filters), calls
// onRows with the rows newest first (by the field `at`) whenever they
// change and onError when the list cannot be read, and shows the stream's
// state in the status element. set(row) merges a row the page changed
// itself; close() stops.
export function liveRows({ path, id, at, keep = 500, status, onRows, onError }) {
  const rows = new Map();
  let stopped = false;
  function emit() {
    const list = [...rows.values()].sort((a, b) => (a[at] < b[at] ? 1 : a[at] > b[at] ? -1 : 0));
    for (const r of list.splice(keep)) rows.delete(r[id]);
    onRows(list);
  }
  function load() {
    api('GET', path + (path.includes('?') ? '&' : '?') + 'limit=' + Math.min(keep, 500)).then((list) => {
      for (const r of list) rows.set(r[id], r);
      emit();
    }).catch((e) => { if (!stopped) onError(e); });
  }
  const stream = watch(path, (r) => { rows.set(r[id], r); emit(); }, (st, msg) => {
    status.className = st === 'error' ? 'state error' : 'state';
    status.textContent = st === 'open' ? 'Live.' + (msg ? ' ' + msg + ' The list was read again.' : '') : msg;
    if (st === 'open') load();
  });
  return {
    set(r) { rows.set(r[id], r); emit(); },
    close() { stopped = true; stream.close(); },
  };
}
