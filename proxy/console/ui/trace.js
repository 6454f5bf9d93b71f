// Trace: one request's story — the client's request, every attempt with its
// issues highlighted at their claims, the diff from draft to the answer returned,
// downgrades, notice, every upstream try and hidden call, tokens and timings.
import { h, fmtMs, fmtBytes, fmtDateTime, severityName, severityRank, add } from './dom.js';
import { api } from './api.js';
import { t } from './i18n.js';

export async function render(ctx, [id]) {
  const { main } = ctx;
  document.title = t('trace.title') + ' · factgate';
  const back = h('p', null, h('a', { href: '#/requests', text: '← ' + t('trace.back') }));
  add(main, back);
  let view;
  try {
    view = await api('/factgate/v1/requests/' + encodeURIComponent(id));
  } catch (e) {
    if (!ctx.alive()) return;
    add(main, h('h1', { text: t('trace.title') }), h('p', { class: 'error', role: 'alert', text: e.status === 404 ? t('trace.notFound', { id }) : e.message }));
    return;
  }
  if (!ctx.alive()) return; // the reader moved on while the trace loaded
  const tr = view.trace;
  const attempts = tr.attempts || [];
  const final = tr.final || null;
  add(main,
    h('h1', null, t('trace.title'), ' ', h('code', { class: 'small', text: tr.id })),
    overview(tr, view),
    requestSection(tr),
    attemptsSection(tr, view),
    diffSection(view, attempts),
    downgradesSection(tr),
    noticeSection(tr, final),
    upstreamSection(tr),
    timingsSection(tr),
    notesSection(tr),
    h('details', { class: 'raw' }, h('summary', { text: t('trace.raw') }), h('pre', { text: JSON.stringify(tr, null, 2) })),
  );
  // Focusing an issue in the list moves to its claim.
  main.addEventListener('click', (ev) => {
    const a = ev.target.closest('a[data-goto]');
    if (!a) return;
    ev.preventDefault();
    const mark = document.getElementById(a.dataset.goto);
    if (mark) { mark.focus(); mark.scrollIntoView({ block: 'center' }); }
  });
}

function dl(pairs) {
  return h('dl', { class: 'facts-grid' }, pairs.filter((p) => p && p[1] !== undefined && p[1] !== null && p[1] !== '')
    .map(([k, v]) => [h('dt', { text: k }), h('dd', null, v)]));
}

function overview(tr, view) {
  const s = view.summary;
  const final = tr.final;
  const scopes = tr.scopes ? Object.entries(tr.scopes).map(([d, v]) => `${d}: ${v.join(', ')}`).join(' · ') : '';
  const u = tr.usage || {};
  return h('section', { class: 'card', 'aria-labelledby': 'ov-h' },
    h('h2', { id: 'ov-h', text: t('trace.overview') }),
    dl([
      [t('col.time'), fmtDateTime(tr.started)],
      [t('col.route'), tr.route],
      [t('col.variant'), tr.variant],
      [t('trace.model'), tr.request && tr.request.model],
      [t('col.client'), tr.client_key],
      [t('col.status'), s ? String(s.status) + (s.error ? ' ' + s.error : '') : null],
      [t('col.outcome'), final ? h('span', { class: ['outcome', final.outcome], text: t('outcome.' + final.outcome) }) : null],
      [t('trace.issues'), final ? `${(tr.attempts && tr.attempts[0] && tr.attempts[0].counts) || '0'} → ${final.counts}` : null],
      [t('trace.delivered'), deliveredCount(tr)],
      [t('trace.set'), tr.knowledge_set],
      [t('trace.scopes'), scopes],
      [t('trace.session'), tr.session],
      [t('trace.w3c'), w3c(tr.traceparent)],
      [t('col.tokens'), `${u.total_tokens || 0} (${t('trace.prompt')} ${u.prompt_tokens || 0}, ${t('trace.completion')} ${u.completion_tokens || 0})`],
      [t('col.latency'), s ? fmtMs(s.latency_ms) : null],
      [t('trace.incomplete'), tr.validation_incomplete ? t('yes') : null],
    ]));
}

// w3c shows the W3C trace context of the request's OpenTelemetry span (tracing
// on): the trace id the operator's tracing backend names it by, which is the
// trace's own id unless the client sent a traceparent of its own.
function w3c(traceparent) {
  const parts = (traceparent || '').split('-');
  if (parts.length !== 4) return null;
  return h('code', { class: 'small', 'data-w3c-trace': parts[1], text: t('trace.w3cValue', { trace: parts[1], span: parts[2] }) });
}

// deliveredCount reads the count of issues in the answer as delivered, when the
// trace has it (a later factgate adds it beside final.counts).
function deliveredCount(tr) {
  const f = tr.final || {};
  const d = f.delivered ?? tr.delivered;
  if (d === undefined || d === null) return null;
  return typeof d === 'object' ? JSON.stringify(d) : String(d);
}

function requestSection(tr) {
  const sec = h('section', { class: 'card', 'aria-labelledby': 'rq-h' }, h('h2', { id: 'rq-h', text: t('trace.request') }));
  const req = tr.request;
  if (!req) {
    add(sec, h('p', { class: 'muted', text: t('trace.noRequest') }));
    return sec;
  }
  for (const [i, m] of req.messages.entries()) {
    const lines = m.content.split('\n').length;
    // Facts (an operation log) are long: collapsed, with their size.
    const long = m.content.length > 600 || lines > 12;
    const size = m.truncated ? t('trace.cut', { kept: fmtBytes(new TextEncoder().encode(m.content).length), total: fmtBytes(m.bytes) }) : fmtBytes(m.bytes);
    add(sec, h('details', { class: 'message', open: !long },
      h('summary', null, h('span', { class: ['role', m.role], text: m.role }), ' ',
        h('span', { class: 'muted small', text: long ? t('trace.lines', { n: lines, size }) : size }),
        long ? h('span', { class: 'preview', text: ' ' + m.content.split('\n')[0].slice(0, 80) }) : null),
      h('pre', { class: 'content', id: 'msg-' + i, text: m.content + (m.truncated ? '\n…' : '') })));
  }
  return sec;
}

function attemptTitle(a, i) {
  if (a.kind === 'draft') return t('trace.draft');
  return t('trace.' + a.kind, { n: i });
}

function attemptsSection(tr, view) {
  const attempts = tr.attempts || [];
  const sec = h('section', { class: 'card', 'aria-labelledby': 'at-h' }, h('h2', { id: 'at-h', text: t('trace.attempts') }));
  if (attempts.length === 0) {
    add(sec, h('p', { class: 'muted', text: t('trace.noAttempts') }));
    return sec;
  }
  add(sec, attemptTable(attempts, view.returned));
  attempts.forEach((a, i) => add(sec, attemptBlock(a, i, view.attempts[i], view.returned === i)));
  return sec;
}

function attemptTable(attempts, returned) {
  return h('table', { class: 'compact' },
    h('caption', { text: t('trace.perAttempt') }),
    h('thead', null, h('tr', null, ['#', t('trace.kind'), t('trace.issues'), t('trace.duration'), t('trace.requestBytes'), t('trace.prompt'), t('trace.completion'), t('col.tokens'), ''].map((c) => h('th', { scope: 'col', text: c })))),
    h('tbody', null, attempts.map((a, i) => h('tr', null,
      h('td', { class: 'num', text: String(i) }),
      h('td', { text: attemptTitle(a, i) }),
      h('td', { text: a.counts }),
      h('td', { class: 'num', text: fmtMs(a.duration) }),
      h('td', { class: 'num', text: fmtBytes(a.request_bytes || 0) }),
      h('td', { class: 'num', text: String((a.usage || {}).prompt_tokens || 0) }),
      h('td', { class: 'num', text: String((a.usage || {}).completion_tokens || 0) }),
      h('td', { class: 'num', text: String((a.usage || {}).total_tokens || 0) }),
      h('td', null, i === returned ? h('span', { class: 'badge good', text: t('trace.returned') }) : null,
        a.error ? h('span', { class: 'badge bad', text: t('trace.failed') }) : null,
        a.leaked ? h('span', { class: 'badge warn', text: t('trace.leaked') }) : null)))));
}

function attemptBlock(a, i, av, isReturned) {
  const idp = `a${i}`;
  const issues = a.issues || [];
  const block = h('article', { class: ['attempt', isReturned ? 'returned' : null], 'aria-labelledby': idp + '-h' },
    h('h3', { id: idp + '-h' }, attemptTitle(a, i), ' ', h('span', { class: 'muted small', text: `${a.counts} · ${fmtMs(a.duration)}` }),
      isReturned ? h('span', { class: 'badge good', text: t('trace.returned') }) : null));
  if (a.error) add(block, h('p', { class: 'error', text: t('trace.callFailed', { error: a.error }) }));
  const content = h('pre', { class: 'content answer', 'aria-label': t('trace.answerOf', { what: attemptTitle(a, i) }) });
  if (a.content) {
    for (const seg of (av ? av.segments : [{ text: a.content }])) {
      if (!seg.issues || seg.issues.length === 0) {
        add(content, seg.text);
        continue;
      }
      const worst = Math.max(...seg.issues.map((k) => severityRank(issues[k].severity)));
      const first = seg.issues[0];
      const mark = h('mark', {
        class: 'sev-' + severityName(worst),
        tabindex: '0',
        id: `${idp}-m${first}`,
        'aria-describedby': seg.issues.map((k) => `${idp}-i${k}`).join(' '),
        title: seg.issues.map((k) => issues[k].message).join('\n'),
        'data-issues': seg.issues.join(','),
        text: seg.text,
      });
      add(content, mark);
    }
    add(block, content);
  } else {
    add(block, h('p', { class: 'muted', text: t('trace.noContent') }));
  }
  if (issues.length) {
    const placed = new Set();
    if (av) for (const seg of av.segments) for (const k of seg.issues || []) placed.add(k);
    add(block, h('h4', { text: t('trace.issuesOf', { n: issues.length }) }),
      h('ol', { class: 'issues-list' }, issues.map((is, k) => issueItem(is, `${idp}-i${k}`, placed.has(k) ? `${idp}-m${firstMarkOf(av, k)}` : null))));
  }
  return block;
}

function firstMarkOf(av, k) {
  for (const seg of av.segments) {
    if (seg.issues && seg.issues.includes(k)) return seg.issues[0];
  }
  return k;
}

function issueItem(is, id, markId) {
  const sev = severityName(is.severity);
  const rec = is.recommendation || {};
  return h('li', { id, class: 'issue sev-' + sev },
    h('div', { class: 'issue-head' },
      h('span', { class: ['badge', 'sev-' + sev], text: t('sev.' + sev) }), ' ',
      h('code', { text: is.code }), ' ',
      is.path ? (markId ? h('a', { href: '#', 'data-goto': markId, text: is.path, 'aria-label': t('trace.goto', { path: is.path }) }) : h('code', { class: 'muted', text: is.path })) : null),
    h('p', { class: 'domain', text: is.message }),
    rec.text || rec.evidenceLevel || rec.remove || (rec.alternatives && rec.alternatives.length)
      ? h('p', { class: 'recommendation' }, h('strong', { text: t('trace.recommendation') + ' ' }),
        rec.text ? h('span', { class: 'domain', text: rec.text }) : null,
        rec.evidenceLevel ? h('span', { class: 'muted', text: ` (${t('trace.level')}: ${rec.evidenceLevel})` }) : null,
        rec.remove ? h('span', { class: 'muted', text: ` (${t('trace.removeClaim')})` }) : null,
        rec.alternatives && rec.alternatives.length ? h('span', { class: 'muted', text: ` (${t('trace.alternatives')}: ${rec.alternatives.join(', ')})` }) : null)
      : null,
    is.facts && is.facts.length
      ? h('div', { class: 'cited' }, h('span', { class: 'small muted', text: t('trace.cites') }),
        h('ul', { class: 'oplines' }, is.facts.map((f) => h('li', null, h('code', { text: f.text })))))
      : null);
}

function diffSection(view, attempts) {
  const sec = h('section', { class: 'card', 'aria-labelledby': 'df-h' }, h('h2', { id: 'df-h', text: t('trace.diff') }));
  if (attempts.length < 2 || view.returned === 0) {
    add(sec, h('p', { class: 'muted', text: attempts.length ? t('trace.draftReturned') : t('trace.noAttempts') }));
    return sec;
  }
  if (!view.diff.length) {
    add(sec, h('p', { class: 'muted', text: t('trace.noContent') }));
    return sec;
  }
  add(sec, h('p', { class: 'muted small', text: t('trace.diffExplain', { to: attemptTitle(attempts[view.returned], view.returned) }) }),
    diffView(view.diff));
  return sec;
}

export function diffView(ops) {
  return h('pre', { class: 'content diff' }, ops.map((op) => {
    if (op.op === 'eq') return op.text;
    const tag = op.op === 'del' ? 'del' : 'ins';
    return h(tag, null, h('span', { class: 'sr-only', text: op.op === 'del' ? t('diff.removed') : t('diff.added') }), op.text);
  }));
}

function downgradesSection(tr) {
  const sec = h('section', { class: 'card', 'aria-labelledby': 'dg-h' }, h('h2', { id: 'dg-h', text: t('trace.downgrades') }));
  const list = tr.downgrades || [];
  if (!list.length) {
    add(sec, h('p', { class: 'muted', text: t('trace.noDowngrades') }));
    return sec;
  }
  add(sec, h('table', { class: 'compact' },
    h('thead', null, h('tr', null, [t('trace.claim'), t('trace.from'), t('trace.to'), t('trace.alternatives')].map((c) => h('th', { scope: 'col', text: c })))),
    h('tbody', null, list.map((d) => h('tr', null, h('td', null, h('code', { text: d.path })), h('td', { text: d.from }), h('td', { text: d.removed ? t('trace.removedClaim') : d.to }),
      h('td', { text: (d.alternatives || []).join(', ') }))))));
  return sec;
}

function noticeSection(tr, final) {
  const notice = tr.notice ?? (final && final.notice);
  if (notice === undefined || notice === null || notice === '') return null;
  const text = typeof notice === 'string' ? notice : (notice.text ?? JSON.stringify(notice, null, 2));
  return h('section', { class: 'card notice', 'aria-labelledby': 'nt-h' },
    h('h2', { id: 'nt-h', text: t('trace.notice') }),
    h('pre', { class: 'content domain', text: text }));
}

// upstreamSection lists every try of every upstream call (retries, fallbacks,
// skipped upstreams) and the hidden calls that gave no answer (judge calls).
function upstreamSection(tr) {
  const tries = tr.upstream_attempts || [];
  const calls = tr.calls || [];
  if (!tries.length && !calls.length) return null;
  const sec = h('section', { class: 'card', 'aria-labelledby': 'up-h' }, h('h2', { id: 'up-h', text: t('trace.upstream') }));
  if (tries.length) {
    add(sec, h('table', { class: 'compact upstream-attempts' },
      h('caption', { text: t('trace.upstreamTries') }),
      h('thead', null, h('tr', null, ['#', t('trace.upstreamName'), t('trace.key'), t('col.status'), t('col.outcome'), t('trace.wait'), t('trace.duration'), t('trace.error')].map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', null, tries.map((a, i) => h('tr', null,
        h('td', { class: 'num', text: String(i) }),
        h('td', { text: a.upstream }),
        h('td', null, a.key ? h('code', { text: a.key }) : null),
        h('td', { class: 'num', text: a.status ? String(a.status) : '' }),
        h('td', null, h('span', { class: ['badge', a.outcome === 'ok' ? 'good' : 'bad'], text: a.outcome })),
        h('td', { class: 'num', text: a.wait ? fmtMs(a.wait) : '' }),
        h('td', { class: 'num', text: fmtMs(a.duration || 0) }),
        h('td', { class: 'small', text: a.error || '' }))))));
  }
  if (calls.length) {
    add(sec, h('table', { class: 'compact hidden-calls' },
      h('caption', { text: t('trace.hiddenCalls') }),
      h('thead', null, h('tr', null, [t('trace.kind'), t('trace.validator'), t('col.outcome'), t('trace.duration'), t('col.tokens'), t('trace.error')].map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', null, calls.map((c) => h('tr', null,
        h('td', { text: c.kind }),
        h('td', null, h('code', { text: c.validator })),
        h('td', null, h('span', { class: ['badge', c.result === 'ok' ? 'good' : 'bad'], text: c.result })),
        h('td', { class: 'num', text: fmtMs(c.duration || 0) }),
        h('td', { class: 'num', text: String((c.usage || {}).total_tokens || 0) }),
        h('td', { class: 'small', text: c.error || '' }))))));
  }
  return sec;
}

function timingsSection(tr) {
  const timings = Object.entries(tr.timings || {});
  if (!timings.length) return null;
  return h('section', { class: 'card', 'aria-labelledby': 'tm-h' },
    h('h2', { id: 'tm-h', text: t('trace.timings') }),
    dl(timings.map(([k, v]) => [k, fmtMs(v)])));
}

function notesSection(tr) {
  if (!tr.notes || !tr.notes.length) return null;
  return h('section', { class: 'card', 'aria-labelledby': 'nn-h' },
    h('h2', { id: 'nn-h', text: t('trace.notes') }),
    h('ul', { class: 'notes' }, tr.notes.map((n) => h('li', { text: n }))));
}
