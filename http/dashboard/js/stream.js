// Streams for the console: a one-time ticket (POST /v2/stream-tickets) in
// the stream's URL instead of the token, which never goes into a URL; a
// dropped stream reconnects with a new ticket and a growing delay.

import { api } from './api.js';

async function ticket() {
  return (await api('POST', '/stream-tickets', {})).ticket;
}

// openFeed keeps the live feed's WebSocket open until close() and hands
// each parsed frame to onFrame; onState tells 'open', 'reconnecting' or an
// error message.
export function openFeed(onFrame, onState) {
  let ws = null;
  let closed = false;
  let delay = 500;
  async function connect() {
    if (closed) return;
    let t;
    try {
      t = await ticket();
    } catch (e) {
      onState('error', 'The live feed cannot start: ' + e.message);
      retry();
      return;
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    ws = new WebSocket(proto + '//' + location.host + '/v2/ws/events?ticket=' + encodeURIComponent(t));
    ws.onopen = () => { delay = 500; onState('open'); };
    ws.onmessage = (m) => {
      try { onFrame(JSON.parse(m.data)); } catch (e) { /* a frame that is not JSON is skipped */ }
    };
    ws.onclose = () => { if (!closed) { onState('reconnecting'); retry(); } };
  }
  function retry() {
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 10000);
  }
  connect();
  return { close() { closed = true; if (ws) ws.close(); } };
}

// watch opens a watch=true list (server-sent events) with a ticket and
// hands each row to onRow, reconnecting as openFeed does.
export function watch(path, onRow, onState) {
  let es = null;
  let closed = false;
  let delay = 500;
  async function connect() {
    if (closed) return;
    let t;
    try {
      t = await ticket();
    } catch (e) {
      onState('error', 'The stream cannot start: ' + e.message);
      setTimeout(connect, delay = Math.min(delay * 2, 10000));
      return;
    }
    es = new EventSource('/v2' + path + (path.includes('?') ? '&' : '?') + 'watch=true&ticket=' + encodeURIComponent(t));
    es.onopen = () => { delay = 500; onState('open'); };
    es.onmessage = (m) => { try { onRow(JSON.parse(m.data)); } catch (e) { /* skipped */ } };
    for (const name of ['alert', 'incident']) {
      es.addEventListener(name, (m) => { try { onRow(JSON.parse(m.data)); } catch (e) { /* skipped */ } });
    }
    es.onerror = () => {
      if (closed) return;
      es.close();
      onState('reconnecting');
      setTimeout(connect, delay = Math.min(delay * 2, 10000));
    };
  }
  connect();
  return { close() { closed = true; if (es) es.close(); } };
}
