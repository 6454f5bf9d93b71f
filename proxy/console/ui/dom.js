// Small DOM helpers: elements are built with h(), never from HTML strings, so
// that no text from a request or a knowledge entry is ever parsed as markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else if (k === 'text') {
      el.textContent = v;
    } else if (k === 'value' && 'value' in el) {
      el.value = v;
    } else if (k === 'checked' || k === 'selected' || k === 'open' || k === 'hidden' || k === 'disabled') {
      el[k] = !!v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function announce(text) {
  const live = document.getElementById('announce');
  live.textContent = '';
  // A fresh text node makes screen readers speak the same message twice in a row.
  setTimeout(() => { live.textContent = text; }, 50);
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms >= 1000) return (ms / 1000).toFixed(ms >= 10000 ? 1 : 2) + ' s';
  return (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1)) + ' ms';
}

export function fmtPct(x, digits = 1) {
  if (x === null || x === undefined) return '–';
  return (x * 100).toFixed(digits) + '%';
}

export function fmtBytes(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

export function fmtTime(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  const pad = (n) => String(n).padStart(2, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fmtDateTime(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toLocaleString();
}

// Severity letters as in the X-Factgate-Issues header.
export const SEVERITIES = ['Info', 'WeakEvidence', 'Warning', 'Contradiction', 'Fatal'];

export function severityName(v) {
  return typeof v === 'number' ? SEVERITIES[v] || String(v) : v;
}

export function severityRank(v) {
  const i = SEVERITIES.indexOf(severityName(v));
  return i < 0 ? 0 : i;
}

// add appends children to el as h() does: arrays flattened, null, undefined
// and false skipped (the native append would print them).
export function add(el, ...children) {
  append(el, children);
  return el;
}
