// Streams for the console: a one-time ticket (POST /v2/stream-tickets) in
// the stream's URL instead of the token, which never goes into a URL; a
// dropped stream reconnects with a new ticket and a growing delay.

import { api } from './api.js';

async function ticket() {
  return (await api('POST', '/stream-tickets', {})).ticket;
}

// keepOpen opens a stream with open(ticket, opened, lost) until close(),
// and opens it again with a new ticket whenever it is lost; onState tells
// 'open', 'reconnecting' or 'error' with a message.
function keepOpen(open, onState) {
  let closed = false;
  let delay = 500;
  let current = null;
  function retry() {
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 10000);
  }
  async function connect() {
    if (closed) return;
    let t;
    try {
      t = await ticket();
    } catch (e) {
      onState('error', 'The stream cannot start: ' + e.message);
      retry();
      return;
    }
    current = open(t, () => { delay = 500; onState('open'); }, () => {
      if (!closed) { onState('reconnecting'); retry(); }
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
    ws.onopen = opened;
    ws.onmessage = parsed(onFrame);
    ws.onclose = lost;
    return ws;
  }, onState);
}

// watch keeps a watch=true list (server-sent events) open and hands each
// row to onRow.
export function watch(path, onRow, onState) {
  return keepOpen((t, opened, lost) => {
    const es = new EventSource('/v2' + path + (path.includes('?') ? '&' : '?') + 'watch=true&ticket=' + encodeURIComponent(t));
    es.onopen = opened;
    es.onmessage = parsed(onRow);
    for (const name of ['alert', 'incident']) es.addEventListener(name, parsed(onRow));
    es.onerror = () => { es.close(); lost(); };
    return es;
  }, onState);
}
