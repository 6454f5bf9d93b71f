// Experiments: per variant the rates with their 95% intervals, tokens and
// latency as charts, the comparisons with the control, and the assignment
// shares — from GET /factgate/v1/experiments.
import { h, fmtMs, fmtPct, add } from './dom.js';
import { api } from './api.js';
import { t } from './i18n.js';
import { intervalChart, barChart } from './charts.js';

const RATES = ['first_draft_contradiction', 'revision', 'residual_contradiction', 'resolved', 'downgrade'];

export async function render(ctx) {
  const { main } = ctx;
  document.title = t('exp.title') + ' · factgate';
  add(main, h('h1', { text: t('exp.title') }), h('p', { class: 'muted', text: t('exp.explain') }));
  let rep;
  try {
    rep = await api('/factgate/v1/experiments');
  } catch (e) {
    if (ctx.alive()) add(main, h('p', { class: 'error', role: 'alert', text: e.message }));
    return;
  }
  if (!ctx.alive()) return; // the reader moved on while the report loaded
  if (!rep.experiments.length) {
    add(main, h('p', { class: 'card', text: t('exp.none') }));
    return;
  }
  rep.experiments.forEach((ex, n) => add(main, experiment(ex, n)));
}

// pct reads as the terminal report does: "31.6% [25.5, 38.4] · 62/196".
function pct(r) {
  const n = (x) => (x * 100).toFixed(1);
  return `${fmtPct(r.rate)} [${n(r.low)}, ${n(r.high)}] · ${r.count}/${r.total}`;
}

function experiment(ex, n) {
  const id = `x${n}`;
  const totalReq = ex.variants.reduce((a, v) => a + v.requests, 0);
  const sec = h('section', { class: 'card experiment', 'aria-labelledby': id + '-h', 'data-experiment': ex.name },
    h('h2', { id: id + '-h' }, ex.name, ' ', h('span', { class: 'muted small', text: t('exp.sub', { route: ex.route, control: ex.control }) })));
  if (ex.error) add(sec, h('p', { class: 'error', role: 'alert', text: ex.error }));

  add(sec, h('table', { class: 'compact' },
    h('caption', { text: t('exp.variants') }),
    h('thead', null, h('tr', null, [t('col.variant'), t('exp.share'), t('exp.observed'), t('exp.requests'), t('exp.forced'), t('exp.validated'), t('exp.hidden')].map((c) => h('th', { scope: 'col', text: c })))),
    h('tbody', null, ex.variants.map((v) => h('tr', null,
      h('th', { scope: 'row' }, v.name, v.control ? h('span', { class: 'badge', text: t('exp.control') }) : null),
      h('td', { class: 'num', text: fmtPct(v.share, 0) }),
      h('td', { class: 'num', text: totalReq ? fmtPct(v.requests / totalReq) : '–' }),
      h('td', { class: 'num', text: String(v.requests) }),
      h('td', { class: 'num', text: String(v.forced_requests) }),
      h('td', { class: 'num', text: String(v.validated) }),
      h('td', { class: 'num', text: String(v.revisions) }))))));

  const grid = h('div', { class: 'charts' });
  for (const m of RATES) {
    add(grid, intervalChart({
      id: `${id}-${m}`,
      metric: m,
      title: t('rate.' + m),
      note: t('rate.' + m + '.of'),
      fmt: (v) => fmtPct(v, 0),
      rows: ex.variants.map((v) => {
        const r = v.rates[m];
        return { label: v.name, control: v.control, rate: r.rate, low: r.low, high: r.high, text: pct(r), empty: t('exp.noData') };
      }),
    }));
  }
  add(grid, barChart({
    id: `${id}-tokens`, metric: 'tokens', title: t('exp.tokens'), note: t('exp.tokensNote'),
    fmt: (v) => String(Math.round(v)),
    rows: ex.variants.map((v) => {
      const answered = v.requests - v.upstream_errors;
      const mean = v.tokens.mean;
      return { label: v.name, value: mean ?? undefined, part: answered > 0 ? v.tokens.draft / answered : undefined,
        text: mean === null ? '' : t('exp.tokensRow', { mean: Math.round(mean), draft: answered > 0 ? Math.round(v.tokens.draft / answered) : 0 }),
        empty: t('exp.noData') };
    }),
  }));
  add(grid, barChart({
    id: `${id}-latency`, metric: 'latency', title: t('exp.latency'), note: t('exp.latencyNote'),
    fmt: (v) => fmtMs(v),
    rows: ex.variants.map((v) => {
      const l = v.latency_ms;
      return { label: v.name, value: l.mean ?? undefined, mark: l.p95_at_most ?? undefined,
        text: l.mean === null ? '' : t('exp.latencyRow', { mean: fmtMs(l.mean), p95: l.p95_at_most === null ? '–' : fmtMs(l.p95_at_most) }),
        empty: t('exp.noData') };
    }),
  }));
  add(grid, barChart({
    id: `${id}-shares`, metric: 'shares', title: t('exp.shares'), note: t('exp.sharesNote'),
    fmt: (v) => fmtPct(v, 0),
    rows: ex.variants.map((v) => ({
      label: v.name, value: totalReq ? v.requests / totalReq : undefined, mark: v.share,
      text: t('exp.sharesRow', { observed: totalReq ? fmtPct(v.requests / totalReq) : '–', configured: fmtPct(v.share, 0) }),
      empty: t('exp.noData'),
    })),
  }));
  add(sec, grid);

  if (ex.comparisons && ex.comparisons.length) {
    add(sec, h('table', { class: 'compact comparisons' },
      h('caption', { text: t('exp.comparisons', { control: ex.control }) }),
      h('thead', null, h('tr', null, [t('col.variant'), t('exp.metric'), t('exp.difference'), t('exp.interval'), 'z', 'p', t('exp.reading')].map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', null, ex.comparisons.map((c) => {
        const sig = c.p_value !== null && c.p_value < 0.05;
        const reading = c.difference === null ? t('exp.noData') : !sig ? t('exp.noSig') : c.difference < 0 ? t('exp.lower') : t('exp.higher');
        return h('tr', { 'data-variant': c.variant, 'data-metric': c.metric },
          h('th', { scope: 'row', text: c.variant }),
          h('td', { text: t('rate.' + c.metric) }),
          h('td', { class: 'num', text: c.difference === null ? '–' : pp(c.difference) }),
          h('td', { class: 'num', text: c.low === null ? '–' : `[${pp(c.low)}, ${pp(c.high)}]` }),
          h('td', { class: 'num', text: c.z === null ? '–' : c.z.toFixed(2) }),
          h('td', { class: 'num', text: c.p_value === null ? '–' : c.p_value < 0.0001 ? '< 0.0001' : c.p_value.toFixed(4) }),
          h('td', null, h('span', { class: ['badge', sig ? (c.difference < 0 ? 'good' : 'bad') : null], text: reading })));
      }))));
  }
  return sec;
}

function pp(x) {
  const v = x * 100;
  return (v > 0 ? '+' : '') + v.toFixed(1) + ' pp';
}
