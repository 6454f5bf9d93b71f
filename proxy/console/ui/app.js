// The console's single page: a hash router over four views, the login form and
// the language switch.
import { h, clear, add } from './dom.js';
import { api, setUnauthorizedHandler } from './api.js';
import { t, lang, setLang, applyStatic } from './i18n.js';
import * as requests from './requests.js';
import * as trace from './trace.js';
import * as experiments from './experiments.js';
import * as knowledge from './knowledge.js';

// view counts the views shown: a view's pending work (a fetch that resolves after
// the reader moved on) checks ctx.alive() before it touches the page or the URL.
const state = { session: null, cleanup: null, first: true, view: 0 };

// leaveView ends the current view: its cleanup runs and its ctx.alive() turns false.
function leaveView() {
  state.view++;
  if (state.cleanup) { state.cleanup(); state.cleanup = null; }
}

async function boot() {
  const sel = document.getElementById('lang');
  sel.value = lang();
  sel.addEventListener('change', () => { setLang(sel.value); applyStatic(); renderWho(); route(); });
  applyStatic();
  setUnauthorizedHandler(() => { state.session = null; renderWho(); showLogin(); });
  document.getElementById('logout').addEventListener('click', logout);
  // The skip link moves focus without touching the hash the router reads.
  document.querySelector('.skip').addEventListener('click', (ev) => {
    ev.preventDefault();
    document.getElementById('main').focus();
  });
  window.addEventListener('hashchange', route);
  await loadSession();
  route();
}

async function loadSession() {
  try {
    state.session = await api('/factgate/v1/session', { quiet401: true });
  } catch (e) {
    state.session = null;
    if (e.status !== 401) throw e;
  }
  renderWho();
}

function renderWho() {
  const who = clear(document.getElementById('who'));
  const out = document.getElementById('logout');
  const s = state.session;
  out.hidden = !(s && s.session);
  if (!s) return;
  if (s.anonymous) {
    add(who, t('who.readonly'));
    if (s.can_login) {
      add(who, ' · ', h('a', { href: '#/login', text: t('who.adminLogin') }));
    }
    return;
  }
  add(who, h('span', { text: s.name }), s.admin ? h('span', { class: 'badge admin', text: t('who.admin') }) : null);
}

async function logout() {
  try { await api('/factgate/v1/session', { method: 'DELETE' }); } catch { /* the cookie is gone either way */ }
  state.session = null;
  await loadSession().catch(() => {});
  location.hash = '#/requests';
  route();
}

function showLogin() {
  leaveView();
  const main = clear(document.getElementById('main'));
  const err = h('p', { class: 'error', role: 'alert' });
  const input = h('input', { id: 'login-key', type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'login card', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      state.session = await api('/factgate/v1/session', { method: 'POST', body: { key: input.value }, quiet401: true });
      input.value = '';
      renderWho();
      if (location.hash.startsWith('#/login')) location.hash = '#/requests';
      route();
    } catch (e) {
      err.textContent = e.status === 401 ? t('login.invalid') : e.message;
      input.focus();
    }
  } },
    h('h1', { text: t('login.title') }),
    h('p', { text: t('login.explain') }),
    h('label', { for: 'login-key', text: t('login.key') }),
    input,
    h('button', { type: 'submit', class: 'primary', text: t('login.submit') }),
    err,
  );
  add(main, form);
  setCurrent('');
  document.title = t('login.title') + ' · factgate';
  input.focus();
}

function setCurrent(page) {
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function route() {
  // In-page anchors (#main) are not views.
  if (location.hash && !location.hash.startsWith('#/')) return;
  leaveView();
  const [path, qs] = location.hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean);
  const page = parts[0] || 'requests';
  if (!state.session || page === 'login') {
    showLogin();
    return;
  }
  const main = clear(document.getElementById('main'));
  const view = state.view;
  const ctx = {
    main,
    session: state.session,
    params: new URLSearchParams(qs || ''),
    // A view left before it registered its cleanup has it run at once.
    onCleanup: (fn) => { if (state.view === view) state.cleanup = fn; else fn(); },
    // alive reports that this view is still the one shown.
    alive: () => state.view === view,
  };
  const views = { requests, trace, experiments, knowledge };
  const shown = views[page];
  setCurrent(page === 'trace' ? 'requests' : page);
  if (!shown) {
    add(main, h('h1', { text: t('notFound') }));
    return;
  }
  shown.render(ctx, parts.slice(1).map(decodeURIComponent));
  if (!state.first) {
    // Move focus to the new view for keyboard and screen reader users.
    main.focus({ preventScroll: false });
  }
  state.first = false;
}

boot().catch((e) => {
  const main = clear(document.getElementById('main'));
  add(main, h('p', { class: 'error', role: 'alert', text: e.message }));
});
