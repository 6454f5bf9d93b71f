// Requests: this replica's recent intercepted requests, filterable, newest
// first, live through the server-sent event feed.
import { h, clear, announce, fmtMs, fmtTime, SEVERITIES, add } from './dom.js';
import { api, query } from './api.js';
import { t } from './i18n.js';

const FILTERS = ['route', 'variant', 'client', 'status', 'outcome', 'revised', 'min_severity', 'q'];
const OUTCOMES = ['accepted', 'resolved', 'improved', 'downgraded', 'failed'];

export function render(ctx) {
  const { main, session } = ctx;
  const filters = {};
  for (const k of FILTERS) filters[k] = ctx.params.get(k) || '';

  const tbody = h('tbody');
  const status = h('p', { class: 'muted', id: 'requests-status' });
  const more = h('button', { type: 'button', hidden: true, text: t('requests.older') });
  const live = h('button', { type: 'button', class: 'toggle', 'aria-pressed': 'true', text: t('requests.live') });
  let oldest = 0;
  let source = null;

  const selects = {};
  const select = (name, label, options) => {
    const id = 'f-' + name;
    const el = h('select', { id, name },
      h('option', { value: '', text: t('filter.any') }),
      options.map((o) => h('option', { value: o.value ?? o, text: o.label ?? o, selected: (o.value ?? o) === filters[name] })));
    el.addEventListener('change', () => { filters[name] = el.value; apply(); });
    selects[name] = el;
    return h('div', { class: 'field' }, h('label', { for: id, text: label }), el);
  };
  const search = h('input', { id: 'f-q', type: 'search', value: filters.q, placeholder: t('filter.qHint') });
  let timer = 0;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => { filters.q = search.value.trim(); apply(); }, 250);
  });

  const form = h('form', { class: 'filters', role: 'search', 'aria-label': t('filter.label'), onsubmit: (e) => e.preventDefault() },
    select('route', t('col.route'), []),
    select('variant', t('col.variant'), []),
    session.admin ? select('client', t('col.client'), []) : null,
    select('status', t('col.status'), [
      { value: 'ok', label: t('status.ok') }, { value: 'error', label: t('status.error') },
      '2xx', '4xx', '5xx']),
    select('outcome', t('col.outcome'), OUTCOMES.map((o) => ({ value: o, label: t('outcome.' + o) }))),
    select('revised', t('filter.revised'), [{ value: 'true', label: t('yes') }, { value: 'false', label: t('no') }]),
    select('min_severity', t('filter.minSeverity'), SEVERITIES.slice(1).map((s) => ({ value: s, label: t('sev.' + s) }))),
    h('div', { class: 'field grow' }, h('label', { for: 'f-q', text: t('filter.q') }), search),
  );

  const cols = ['time', 'route', 'variant', session.admin ? 'client' : null,
    'status', 'issues', 'outcome', 'revisions', 'tokens', 'latency'].filter(Boolean);
  const table = h('table', { class: 'requests' },
    h('caption', { class: 'sr-only', text: t('requests.caption') }),
    h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col', class: 'col-' + c, text: t('col.' + c) })))),
    tbody);

  add(main,
    h('div', { class: 'pagehead' },
      h('h1', { text: t('requests.title') }),
      h('div', { class: 'actions' }, live)),
    h('p', { class: 'muted', text: t('requests.perReplica') }),
    form,
    status,
    h('div', { class: 'tablewrap' }, table),
    more);

  function row(r, fresh) {
    const href = '#/trace/' + encodeURIComponent(r.trace_id);
    const cells = {
      time: h('td', null, h('a', { href, 'aria-label': t('requests.open', { time: fmtTime(r.time), route: r.route }), text: fmtTime(r.time) })),
      route: h('td', { text: r.route }),
      variant: h('td', { text: r.variant || '–' }),
      client: h('td', { text: r.client || '–' }),
      status: h('td', null, h('span', { class: ['status', r.status >= 400 ? 'bad' : 'good'], text: String(r.status) }),
        r.error ? h('span', { class: 'muted small', text: ' ' + r.error }) : null),
      issues: h('td', null, r.validated ? issueCounts(r) : h('span', { class: 'muted', text: t('requests.notValidated') })),
      outcome: h('td', null, r.outcome ? h('span', { class: ['outcome', r.outcome], text: t('outcome.' + r.outcome) }) : '–'),
      revisions: h('td', { class: 'num', text: String(r.revisions) }),
      tokens: h('td', { class: 'num', text: String(r.tokens.total_tokens) }),
      latency: h('td', { class: 'num', text: fmtMs(r.latency_ms) }),
    };
    return h('tr', { class: fresh ? 'fresh' : null, 'data-trace': r.trace_id, 'data-seq': r.seq }, cols.map((c) => cells[c]));
  }

  function fillMenu(name, values) {
    const el = selects[name];
    if (!el) return;
    const have = new Set([...el.options].map((o) => o.value));
    for (const v of values || []) {
      if (!have.has(v)) add(el, h('option', { value: v, text: v, selected: v === filters[name] }));
    }
  }

  async function load(append) {
    const params = { ...filters, limit: 100 };
    if (append) params.before = oldest;
    status.textContent = t('loading');
    try {
      const data = await api('/factgate/v1/requests' + query(params));
      if (!ctx.alive()) return;
      if (!append) clear(tbody);
      for (const r of data.requests) {
        add(tbody, row(r, false));
        oldest = r.seq;
      }
      fillMenu('route', data.routes);
      fillMenu('variant', data.variants);
      fillMenu('client', data.clients);
      more.hidden = !data.more;
      const n = tbody.children.length;
      status.textContent = n === 0 ? t('requests.none') : t('requests.count', { n, kept: data.kept });
    } catch (e) {
      status.textContent = e.message;
    }
  }

  function connect() {
    if (source) source.close();
    source = null;
    // A list that loaded after the reader left opens no feed: nothing would close it.
    if (!ctx.alive()) return;
    const latest = tbody.firstElementChild ? tbody.firstElementChild.dataset.seq : '';
    source = new EventSource('/factgate/v1/requests/stream' + query({ ...filters, after: latest }));
    let burst = 0;
    let burstTimer = 0;
    source.addEventListener('request', (ev) => {
      const r = JSON.parse(ev.data);
      if (tbody.querySelector(`tr[data-seq="${r.seq}"]`)) return;
      tbody.prepend(row(r, true));
      status.textContent = t('requests.count', { n: tbody.children.length, kept: '' }).replace(/ \(.*\)$/, '');
      burst++;
      clearTimeout(burstTimer);
      burstTimer = setTimeout(() => { announce(t('requests.new', { n: burst })); burst = 0; }, 1000);
    });
  }

  function apply() {
    const q = query(Object.fromEntries(FILTERS.map((k) => [k, filters[k]])));
    if (ctx.alive()) history.replaceState(null, '', '#/requests' + q);
    load(false).then(() => { if (live.getAttribute('aria-pressed') === 'true') connect(); });
  }

  more.addEventListener('click', () => load(true));
  live.addEventListener('click', () => {
    const on = live.getAttribute('aria-pressed') !== 'true';
    live.setAttribute('aria-pressed', String(on));
    if (on) connect(); else if (source) { source.close(); source = null; }
  });
  ctx.onCleanup(() => { if (source) source.close(); clearTimeout(timer); });
  document.title = t('requests.title') + ' · factgate';
  load(false).then(connect);
}

// issueCounts shows the draft's issues and those of the answer as the client
// received it (after the downgrade), as X-Factgate-Issues' draft and delivered.
function issueCounts(r) {
  const cls = (c) => (c === '0' ? 'clean' : /[CF]/.test(c) ? 'severe' : 'mild');
  const delivered = r.delivered_issues ?? r.final_issues;
  return h('span', { class: 'issues', 'aria-label': t('requests.issuesLabel', { draft: r.draft_issues, delivered }) },
    h('span', { class: ['count', cls(r.draft_issues)], text: r.draft_issues }),
    h('span', { 'aria-hidden': 'true', text: ' → ' }),
    h('span', { class: ['count', 'delivered', cls(delivered)], text: delivered }));
}
