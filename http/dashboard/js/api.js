// The API client of the console: the public /v2 API with the operator's
// token, kept in this tab's sessionStorage only (never in a URL, never in
// localStorage), and errors turned into messages an operator can act on.

const TOKEN = 'svc.console.token';
const ROLE = 'svc.console.role';
const TENANT = 'svc.console.tenant';

export const session = {
  get token() { return sessionStorage.getItem(TOKEN); },
  get role() { return sessionStorage.getItem(ROLE); },
  get tenant() { return sessionStorage.getItem(TENANT); },
  save(token, who) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(ROLE, who.role);
    sessionStorage.setItem(TENANT, who.tenant_id);
  },
  clear() {
    for (const k of [TOKEN, ROLE, TENANT]) sessionStorage.removeItem(k);
  },
  // can says whether the signed-in role may take an action of this level.
  can(level) {
    const rank = { viewer: 1, approver: 2, admin: 3 };
    return (rank[this.role] || 0) >= rank[level];
  },
};

// ApiError carries the status and the envelope's reason and code.
export class ApiError extends Error {
  constructor(status, body) {
    const reason = body && body.details && body.details.error;
    super(describe(status, body));
    this.status = status;
    this.reason = reason || (body && body.reason) || '';
    this.details = (body && body.details) || {};
  }
}

function describe(status, body) {
  const msg = body && body.message ? body.message : '';
  switch (status) {
    case 0: return 'The gateway cannot be reached. Check your connection and try again.';
    case 401: return 'Your token was not accepted (wrong, revoked or rotated). Sign in again.';
    case 403: return 'Your role may not do this. ' + msg;
    case 404: return 'Not found: ' + (msg || 'it may have been deleted, or belongs to another tenant.');
    case 409: return 'Conflict: ' + (msg || 'it changed meanwhile (already decided or expired).');
    case 429: case 503: return 'The gateway is busy; try again in a moment. ' + msg;
    default: return msg || ('The gateway answered ' + status + '.');
  }
}

// api calls the /v2 API; a 401 signs out (the token is dead).
export async function api(method, path, body, token = session.token) {
  let resp;
  try {
    resp = await fetch('/v2' + path, {
      method,
      headers: Object.assign({ Authorization: 'Bearer ' + token }, body === undefined ? {} : { 'Content-Type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
  } catch (e) {
    throw new ApiError(0, null);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = { message: text.slice(0, 200) }; }
  }
  if (!resp.ok) {
    const err = new ApiError(resp.status, data);
    if (resp.status === 401 && token === session.token) {
      window.dispatchEvent(new CustomEvent('svc:signed-out', { detail: err.message }));
    }
    throw err;
  }
  return data;
}

// download fetches a file with the token and saves it from memory: a
// download link cannot carry the Authorization header, and the token never
// goes into a URL.
export async function download(path, name) {
  const resp = await fetch('/v2' + path, { headers: { Authorization: 'Bearer ' + session.token }, cache: 'no-store', credentials: 'omit' });
  if (!resp.ok) throw new ApiError(resp.status, null);
  const url = URL.createObjectURL(await resp.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
