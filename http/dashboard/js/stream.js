// Streams for the console: a one-time ticket (POST /v2/stream-tickets) in
// the stream's URL instead of the token, which never goes into a URL; a
// dropped stream reconnects with a new ticket and a growing delay, and the
// page is told why and since when, so an operator knows there was a gap.

import { api, ApiError } from './api.js';

async function ticket() {
  return (await api('POST', '/stream-tickets', {})).ticket;
}

const clock = (d) => d.toLocaleTimeString();

// keepOpen opens a stream with open(ticket, opened, lost) until close(),
// and opens it again with a new ticket whenever it is lost. lost(kind,
// code) says 'refused' when the stream closed before it opened (the
// gateway refused its ticket: expired, already used, or the role lost its
// access) and 'lost' when an open stream ended. onState(state, message)
// tells 'open', 'reconnecting' or 'error'; the message of an 'open' after
// a break says when the stream was lost and when it came back (empty on
// the first open).
function keepOpen(open, onState) {
  let closed = false;
  let delay = 500;
  let current = null;
  let brokeAt = null;
  function retry(message) {
    if (closed) return;
    if (!brokeAt) brokeAt = new Date();
    onState(message.startsWith('The stream cannot start') ? 'error' : 'reconnecting',
      message + ' Retrying in ' + Math.round(delay / 1000 * 10) / 10 + ' s; the list is kept.');
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 10000);
  }
  async function connect() {
    if (closed) return;
    let t;
    try {
      t = await ticket();
    } catch (e) {
      // A dead token signs the console out (api.js); nothing to retry.
      if (e instanceof ApiError && e.status === 401) { closed = true; return; }
      retry('The stream cannot start: ' + e.message);
      return;
    }
    current = open(t, () => {
      delay = 500;
      onState('open', brokeAt ? 'Reconnected at ' + clock(new Date()) + ' after a break from ' + clock(brokeAt) + '.' : '');
      brokeAt = null;
    }, (kind, code) => {
      if (kind === 'refused') retry('The gateway refused the stream (its ticket expired or was already used).');
      else if (code === 1008) retry('The gateway closed the stream because this page fell behind.');
      else if (code === 1001) retry('The gateway is restarting (connection lost).');
      else retry('Connection lost.');
    });
  }
  connect();
  return { close() { closed = true; if (current) current.close(); } };
}

// parsed hands a message's JSON data to fn, skipping what is not JSON.
function parsed(fn) {
  return (m) => { try { fn(JSON.parse(m.data)); } catch (e) { /* not JSON: skipped */ } };
}

// openFeed keeps the live feed's WebSocket open and hands each frame to
// onFrame.
export function openFeed(onFrame, onState) {
  return keepOpen((t, opened, lost) => {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(proto + '//' + location.host + '/v2/ws/events?ticket=' + encodeURIComponent(t));
    let wasOpen = false;
    ws.onopen = () => { wasOpen = true; opened(); };
    ws.onmessage = parsed(onFrame);
    ws.onclose = (ev) => lost(wasOpen ? 'lost' : 'refused', ev.code);
    return ws;
  }, onState);
}

// watch keeps a watch=true list (server-sent events) open and hands each
// row to onRow.
export function watch(path, onRow, onState) {
  return keepOpen((t, opened, lost) => {
    const es = new EventSource('/v2' + path + (path.includes('?') ? '&' : '?') + 'watch=true&ticket=' + encodeURIComponent(t));
    let wasOpen = false;
    es.onopen = () => { wasOpen = true; opened(); };
    es.onmessage = parsed(onRow);
    for (const name of ['alert', 'incident']) es.addEventListener(name, parsed(onRow));
    es.onerror = () => { es.close(); lost(wasOpen ? 'lost' : 'refused'); };
    return es;
  }, onState);
}
