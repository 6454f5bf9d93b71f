// Charts as inline SVG. Every mark carries its numbers in an aria-label (and a
// <title> for the mouse), so the chart reads the same to a screen reader, a
// keyboard user and a test.
import { h, s } from './dom.js';

const W = 600;
const LABEL = 110;
const VALUE = 210;
const ROW = 30;
const PAD = 24;

// niceMax is the axis's end: the smallest of 1, 2, 4, 5, 8 or 10 times a power
// of ten at or above every value (at least floor); rates end at 100% at most.
function niceMax(values, floor, rate) {
  const m = Math.max(floor, ...values.filter((v) => typeof v === 'number'));
  if (rate) return [0.1, 0.2, 0.4, 0.6, 0.8, 1].find((c) => c >= m) || 1;
  const p = Math.pow(10, Math.floor(Math.log10(m)));
  return [1, 2, 4, 5, 8, 10].map((f) => f * p).find((c) => c >= m);
}

function axis(max, fmt, y0, height) {
  const ticks = [];
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    const x = LABEL + ((W - LABEL - VALUE) * i) / 4;
    ticks.push(s('line', { x1: x, x2: x, y1: y0, y2: y0 + height, class: 'grid' }));
    ticks.push(s('text', { x, y: y0 + height + 14, class: 'tick', 'text-anchor': 'middle', text: fmt(v) }));
  }
  return s('g', { 'aria-hidden': 'true' }, ticks);
}

// intervalChart draws a rate per row with its interval: a line from low to high
// and a dot at the rate. Rows without data say so.
export function intervalChart({ id, title, note, metric, rows, fmt }) {
  const max = niceMax(rows.flatMap((r) => [r.high, r.rate]), 0.05, true);
  const height = rows.length * ROW + 8;
  const x = (v) => LABEL + ((W - LABEL - VALUE) * v) / max;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height + PAD}`, class: 'chart', role: 'list', 'aria-labelledby': id },
    axis(max, fmt, 0, height),
    rows.map((r, i) => {
      const y = 16 + i * ROW;
      const has = typeof r.rate === 'number';
      const label = has ? `${r.label}: ${r.text}` : `${r.label}: ${r.empty}`;
      return s('g', { role: 'listitem', 'aria-label': label, 'data-variant': r.label, 'data-rate': has ? r.rate : '', 'data-low': has ? r.low : '', 'data-high': has ? r.high : '', class: r.control ? 'control' : null },
        s('title', { text: label }),
        s('text', { x: LABEL - 8, y: y + 4, 'text-anchor': 'end', class: 'label', text: r.label }),
        has ? [
          s('line', { x1: x(r.low), x2: x(r.high), y1: y, y2: y, class: 'interval' }),
          s('line', { x1: x(r.low), x2: x(r.low), y1: y - 6, y2: y + 6, class: 'interval' }),
          s('line', { x1: x(r.high), x2: x(r.high), y1: y - 6, y2: y + 6, class: 'interval' }),
          s('circle', { cx: x(r.rate), cy: y, r: 5, class: 'point' }),
        ] : null,
        s('text', { x: W - VALUE + 8, y: y + 4, class: 'value', text: has ? r.text : r.empty }));
    }));
  return h('figure', { class: 'chartbox', 'data-metric': metric },
    h('figcaption', { id }, h('strong', { text: title }), note ? h('span', { class: 'muted small', text: ' ' + note }) : null),
    svg);
}

// barChart draws one bar per row (value), optionally split in two stacked parts
// (part: the first part's value), with an optional marker (mark).
export function barChart({ id, title, note, metric, rows, fmt }) {
  const max = niceMax(rows.flatMap((r) => [r.value, r.mark]), 1, false);
  const height = rows.length * ROW + 8;
  const x = (v) => LABEL + ((W - LABEL - VALUE) * v) / max;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height + PAD}`, class: 'chart', role: 'list', 'aria-labelledby': id },
    axis(max, fmt, 0, height),
    rows.map((r, i) => {
      const y = 16 + i * ROW;
      const has = typeof r.value === 'number';
      const label = `${r.label}: ${has ? r.text : r.empty}`;
      return s('g', { role: 'listitem', 'aria-label': label, 'data-variant': r.label, 'data-value': has ? r.value : '' },
        s('title', { text: label }),
        s('text', { x: LABEL - 8, y: y + 4, 'text-anchor': 'end', class: 'label', text: r.label }),
        has ? s('rect', { x: LABEL, y: y - 8, width: Math.max(0, x(r.value) - LABEL), height: 16, class: 'bar' }) : null,
        has && typeof r.part === 'number' ? s('rect', { x: LABEL, y: y - 8, width: Math.max(0, x(r.part) - LABEL), height: 16, class: 'bar part' }) : null,
        typeof r.mark === 'number' ? s('line', { x1: x(r.mark), x2: x(r.mark), y1: y - 11, y2: y + 11, class: 'marker' }) : null,
        s('text', { x: W - VALUE + 8, y: y + 4, class: 'value', text: has ? r.text : r.empty }));
    }));
  return h('figure', { class: 'chartbox', 'data-metric': metric },
    h('figcaption', { id }, h('strong', { text: title }), note ? h('span', { class: 'muted small', text: ' ' + note }) : null),
    svg);
}
