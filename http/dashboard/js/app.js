// The console's shell: sign-in, the navigation the role allows, the hash
// router, sign-out. Each page is one module under pages/ exporting
// { title, path, level, render(main, params) } and returning a cleanup.

import { api, session, ApiError } from './api.js';
import { el, toast } from './dom.js';
import * as approvals from './pages/approvals.js';
import * as feed from './pages/feed.js';
import * as alerts from './pages/alerts.js';
import * as incidents from './pages/incidents.js';
import * as agents from './pages/agents.js';
import * as graph from './pages/graph.js';
import * as decisions from './pages/decisions.js';
import * as receipts from './pages/receipts.js';
import * as scoreboard from './pages/scoreboard.js';
import * as rules from './pages/rules.js';
import * as policies from './pages/policies.js';
import * as mcp from './pages/mcp.js';
import * as pulls from './pages/pulls.js';
import * as status from './pages/status.js';

// pages: one per resource family; a later family adds one line here.
const pages = [approvals, feed, alerts, incidents, agents, decisions, graph, receipts, scoreboard, rules, policies, mcp, pulls, status];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
let cleanup = null;

function signIn(message) {
  session.clear();
  nav.hidden = true;
  who.hidden = true;
  if (cleanup) { cleanup(); cleanup = null; }
  const input = el('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    'aria-describedby': 'token-help' });
  const error = el('p', { id: 'signin-error', class: 'error', role: 'alert', text: message || '' });
  const form = el('form', { class: 'panel signin', 'aria-labelledby': 'signin-title' },
    el('h1', { id: 'signin-title', text: 'Sign in' }),
    el('label', { for: 'token', text: 'Operator token' }), input,
    el('p', { id: 'token-help', class: 'muted', text: 'Kept for this tab only; closing it or signing out forgets it.' }),
    error,
    el('button', { type: 'submit', id: 'sign-in', text: 'Sign in' }));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    error.textContent = '';
    try {
      const me = await api('GET', '/whoami', undefined, token);
      session.save(token, me);
      input.value = '';
      start();
    } catch (e) {
      error.textContent = e instanceof ApiError && e.status === 401
        ? 'That token was not accepted: it is wrong, revoked or rotated.' : e.message;
    }
  });
  main.replaceChildren(form);
  input.focus();
}

function start() {
  who.hidden = false;
  document.getElementById('who-role').textContent = 'Signed in as ' + session.role;
  nav.hidden = false;
  nav.replaceChildren(...pages.filter((p) => session.can(p.level)).map((p) =>
    el('a', { href: '#' + p.path, 'data-page': p.path, text: p.title })));
  if (!location.hash || location.hash === '#') location.hash = '#' + pages[0].path;
  else route();
}

function route() {
  if (!session.token) { signIn(); return; }
  const [path, query] = location.hash.slice(1).split('?');
  const page = pages.find((p) => p.path === path && session.can(p.level)) || pages[0];
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === page.path) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (cleanup) { cleanup(); cleanup = null; }
  document.title = page.title + ' · svc console';
  cleanup = page.render(main, new URLSearchParams(query || '')) || null;
  main.focus();
}

window.addEventListener('hashchange', route);
window.addEventListener('svc:signed-out', (ev) => signIn(ev.detail));
document.getElementById('sign-out').addEventListener('click', () => {
  signIn('Signed out.');
  toast('Signed out: the token is forgotten.');
});

if (session.token) start(); else signIn();
