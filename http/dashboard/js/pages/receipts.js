// Receipts: the chain's verification (admins: POST /v2/receipts/verify-chain)
// with each failing index and its reason, the latest receipts, and the
// public key receipts are signed with.

import { api, session, ApiError } from '../api.js';
import { el, time, state } from '../dom.js';

export const title = 'Receipts';
export const path = '/receipts';
export const level = 'viewer';

export function render(main) {
  const key = el('div', { id: 'receipts-key', class: 'panel' });
  const result = el('div', { id: 'verify-result', role: 'status' });
  const list = el('div', { id: 'receipts-body' });
  const verify = session.can('admin')
    ? el('button', { type: 'button', id: 'verify-chain', text: 'Verify the whole chain', onclick: run })
    : el('p', { class: 'muted', text: 'Chain verification is for admins.' });
  main.replaceChildren(el('h1', { text: 'Receipts' }), key, el('div', { class: 'panel' }, verify, result), list);
  state(key, 'Loading the public key…');
  state(list, 'Loading receipts…');

  api('GET', '/receipts/public-key').then((k) => {
    key.replaceChildren(el('p', {}, el('strong', { text: 'Signing key ' }), el('code', { text: k.key_id })),
      el('p', {}, el('code', { id: 'public-key', text: k.public_key })),
      el('p', { class: 'muted', text: 'Check an export offline: svc verify-receipts -public-key ' + k.public_key + ' FILE' }));
  }).catch((e) => {
    if (e instanceof ApiError && e.status === 404) state(key, 'Receipts are not signed on this gateway (no SVC_RECEIPT_SIGNING_KEY).');
    else state(key, 'Could not load the public key: ' + e.message, true);
  });
  api('GET', '/receipts?limit=50').then((rows) => {
    if (rows.length === 0) { state(list, 'No receipts yet.'); return; }
    list.replaceChildren(el('table', { 'aria-label': 'Latest receipts' },
      el('thead', {}, el('tr', {}, ['Seq', 'Decision', 'Receipt hash', 'Created'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows.map((r) => el('tr', {}, el('td', { text: String(r.seq) }), el('td', { text: r.decision }),
        el('td', {}, el('code', { text: r.receipt_hash })), el('td', {}, time(r.created_at)))))));
  }).catch((e) => state(list, 'Could not load receipts: ' + e.message, true));

  async function run() {
    state(result, 'Verifying…');
    try {
      const v = await api('POST', '/receipts/verify-chain', {});
      if (v.valid) {
        result.replaceChildren(el('p', { id: 'chain-valid', class: 'state', text: 'Valid: ' + v.checked + ' receipts checked, every hash, link and signature.' }));
        return;
      }
      result.replaceChildren(el('p', { class: 'error', role: 'alert', text: 'Invalid: ' + v.errors.length + ' failure(s) among ' + v.checked + ' receipts.' }),
        el('table', { id: 'chain-errors', 'aria-label': 'Chain failures' },
          el('thead', {}, el('tr', {}, ['Index', 'Receipt', 'Failure'].map((h) => el('th', { scope: 'col', text: h })))),
          el('tbody', {}, v.errors.map((e) => el('tr', { 'data-index': String(e.index) }, el('td', { class: 'chain-index', text: String(e.index) }),
            el('td', {}, el('code', { text: e.receipt_id })), el('td', { text: e.error }))))));
    } catch (e) {
      state(result, 'Could not verify: ' + e.message, true);
    }
  }
}
