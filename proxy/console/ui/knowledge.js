// Knowledge: browse the sets by scope and tag, search, render the prompt for a
// context exactly as a route injects it, and — with an admin key — edit overlay
// entries (lint and diff before saving; written to the overlay file and
// reloaded at once).
import { h, clear, announce, fmtBytes, add } from './dom.js';
import { api, query } from './api.js';
import { t } from './i18n.js';
import { diffView } from './trace.js';

export async function render(ctx) {
  const { main, params } = ctx;
  document.title = t('kn.title') + ' · factgate';
  add(main, h('h1', { text: t('kn.title') }));
  let info;
  try {
    info = await api('/factgate/v1/knowledge');
  } catch (e) {
    if (ctx.alive()) add(main, h('p', { class: 'error', role: 'alert', text: e.message }));
    return;
  }
  if (!ctx.alive()) return; // the reader moved on while the sets loaded
  const state = { info, set: null, data: null, scope: params.get('scope') || '', tag: params.get('tag') || '', q: params.get('q') || '' };
  // Without a set named, the default set of the config's pack: the first route with a pack.
  const routePack = (info.routes.find((r) => r.pack && r.injects) || info.routes.find((r) => r.pack) || {}).pack;
  const setName = params.get('set') || (info.sets.find((s) => s.default && s.pack === routePack) ||
    info.sets.find((s) => s.default) || info.sets[0] || {}).name;

  const setSel = h('select', { id: 'kn-set' }, info.sets.map((s) => h('option', { value: s.name, text: `${s.name} (${s.pack})`, selected: s.name === setName })));
  const scopeSel = h('select', { id: 'kn-scope' });
  const tagSel = h('select', { id: 'kn-tag' });
  const search = h('input', { id: 'kn-q', type: 'search', value: state.q, placeholder: t('kn.searchHint') });
  const overlayLine = h('div', { class: 'overlay-line' });
  const list = h('div', { class: 'entries' });
  const count = h('p', { class: 'muted', 'aria-live': 'polite' });
  const newBtn = h('button', { type: 'button', hidden: true, text: t('kn.new') });

  const browse = h('section', { class: 'card', 'aria-labelledby': 'kn-browse-h' },
    h('h2', { id: 'kn-browse-h', text: t('kn.browse') }),
    h('form', { class: 'filters', role: 'search', 'aria-label': t('kn.browse'), onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'field' }, h('label', { for: 'kn-set', text: t('kn.set') }), setSel),
      h('div', { class: 'field' }, h('label', { for: 'kn-scope', text: t('kn.scope') }), scopeSel),
      h('div', { class: 'field' }, h('label', { for: 'kn-tag', text: t('kn.tag') }), tagSel),
      h('div', { class: 'field grow' }, h('label', { for: 'kn-q', text: t('kn.search') }), search)),
    overlayLine, h('div', { class: 'row' }, count, newBtn), list);

  const renderPanel = h('section', { class: 'card', 'aria-labelledby': 'kn-render-h' });
  add(main, h('div', { class: 'kn-layout' }, browse, renderPanel));

  const editor = makeEditor(state, () => loadSet(state.set, true));
  add(main, editor.dialog);

  setSel.addEventListener('change', () => { state.scope = ''; state.tag = ''; loadSet(setSel.value); });
  scopeSel.addEventListener('change', () => { state.scope = scopeSel.value; draw(); });
  tagSel.addEventListener('change', () => { state.tag = tagSel.value; draw(); });
  let timer = 0;
  search.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => { state.q = search.value.trim(); draw(); }, 200); });
  newBtn.addEventListener('click', () => editor.open(null, null));
  ctx.onCleanup(() => { clearTimeout(timer); if (editor.dialog.open) editor.dialog.close(); });

  async function loadSet(name, keepFilters) {
    state.set = name;
    try {
      state.data = await api('/factgate/v1/knowledge/sets/' + encodeURIComponent(name));
    } catch (e) {
      add(clear(list), h('p', { class: 'error', role: 'alert', text: e.message }));
      return;
    }
    if (!ctx.alive()) return;
    const d = state.data;
    add(clear(scopeSel), h('option', { value: '', text: t('kn.allScopes') }),
      ...d.scopes.map((sc) => h('option', { value: scopeKey(sc), text: scopeLabel(sc), selected: scopeKey(sc) === state.scope })));
    const used = new Set(d.scopes.flatMap((sc) => sc.entries.flatMap((e) => e.tags)));
    add(clear(tagSel), h('option', { value: '', text: t('filter.any') }),
      ...[...used].sort().map((tag) => h('option', { value: tag, text: tag, selected: tag === state.tag })));
    clear(overlayLine);
    const ov = d.overlay;
    if (!ov) {
      add(overlayLine, h('p', { class: 'muted', text: t('kn.noOverlay', { set: name }) }));
    } else {
      add(overlayLine, h('p', { class: 'muted' }, t('kn.overlay', { version: ov.version }),
        ov.path ? h('code', { class: 'small', text: ' ' + ov.path }) : null,
        ov.present ? null : ' ' + t('kn.overlayAbsent')));
      if (ov.last_error) add(overlayLine, h('p', { class: 'error', role: 'alert', text: t('kn.overlayError', { error: ov.last_error }) }));
    }
    newBtn.hidden = !(state.info.can_edit && ov);
    if (!keepFilters) drawRender(renderPanel, state);
    draw();
  }

  function draw() {
    const d = state.data;
    if (!d) return;
    const q = state.q.toLowerCase();
    clear(list);
    let shown = 0;
    const canEdit = state.info.can_edit && d.overlay;
    for (const sc of d.scopes) {
      if (state.scope && scopeKey(sc) !== state.scope) continue;
      const entries = sc.entries.filter((e) => (!state.tag || e.tags.includes(state.tag)) &&
        (!q || e.id.toLowerCase().includes(q) || e.text.toLowerCase().includes(q) || e.tags.some((tg) => tg.toLowerCase().includes(q))));
      if (!entries.length) continue;
      shown += entries.length;
      add(list, h('h3', { class: 'scope', text: scopeLabel(sc) }),
        ...entries.map((e) => entryCard(e, sc, d, canEdit ? () => editor.open(e, sc) : null)));
    }
    count.textContent = t('kn.count', { n: shown });
    const q2 = query({ set: state.set, scope: state.scope, tag: state.tag, q: state.q });
    if (ctx.alive()) history.replaceState(null, '', '#/knowledge' + q2);
  }

  if (setName) await loadSet(setName);
}

function scopeKey(sc) { return sc.dimension ? `${sc.dimension}/${sc.value}` : 'global'; }
function scopeLabel(sc) { return sc.dimension ? `${sc.dimension}: ${sc.value}` : t('kn.global'); }

function entryCard(e, sc, d, onEdit) {
  const long = e.text.length > 400;
  const body = h('pre', { class: 'content domain', lang: d.language, text: e.text });
  return h('article', { class: ['entry', 'origin-' + e.origin], 'data-entry': e.id, 'data-scope': scopeKey(sc) },
    h('div', { class: 'entry-head' },
      h('code', { class: 'entry-id', text: e.id }),
      h('span', { class: ['badge', 'origin-' + e.origin], text: t('origin.' + e.origin) }),
      h('span', { class: 'tags' }, e.tags.map((tg) => h('span', { class: 'tag', text: tg }))),
      onEdit ? h('button', { type: 'button', class: 'small', onclick: onEdit, 'aria-label': t('kn.editEntry', { id: e.id }), text: t('kn.edit') }) : null),
    long ? h('details', null, h('summary', { text: e.text.split('\n')[0].slice(0, 100) }), body) : body);
}

function drawRender(panel, state) {
  clear(panel);
  const set = state.info.sets.find((s) => s.name === state.set);
  if (!set) return;
  const routes = state.info.routes.filter((r) => r.injects && r.pack === set.pack);
  const routeSel = h('select', { id: 'rd-route' },
    h('option', { value: '', text: t('kn.knowledgeOnly') }),
    routes.map((r, i) => h('option', { value: r.name, text: r.name, selected: i === 0 })));
  const inputs = {};
  const fields = set.dimensions.map((dim) => {
    const id = 'rd-' + dim.name;
    const input = h('input', { id, type: 'text', autocomplete: 'off', 'aria-describedby': id + '-hint' });
    inputs[dim.name] = input;
    const chips = h('div', { class: 'chips', role: 'group', 'aria-label': t('kn.add', { dim: dim.name }) },
      dim.values.map((v) => h('button', { type: 'button', class: 'chip', text: v, onclick: () => {
        const cur = input.value.split(',').map((x) => x.trim()).filter(Boolean);
        if (!cur.includes(v)) cur.push(v);
        input.value = cur.join(', ');
      } })));
    return h('div', { class: 'field wide' }, h('label', { for: id, text: dim.name }), input,
      h('p', { id: id + '-hint', class: 'muted small', text: dim.name === 'factions' ? t('kn.factionsHint') : t('kn.valuesHint') }), chips);
  });
  const out = h('div', { class: 'render-out' });
  const form = h('form', { class: 'render-form', onsubmit: async (ev) => {
    ev.preventDefault();
    const params = { set: state.set, route: routeSel.value };
    for (const [dim, input] of Object.entries(inputs)) params['scope.' + dim] = input.value.split(',').map((x) => x.trim()).filter(Boolean).join(',');
    add(clear(out), h('p', { class: 'muted', text: t('loading') }));
    try {
      const r = await api('/factgate/v1/knowledge/render' + query(params));
      add(clear(out), 
        h('p', { class: 'muted small', text: (r.injected ? t('kn.asInjected', { route: r.route }) : t('kn.knowledgeOnlyNote')) + ' · ' + fmtBytes(r.bytes) + ' · v' + r.version }),
        r.unknown && r.unknown.length ? h('p', { class: 'warn', text: t('kn.unknownScopes', { list: r.unknown.join(', ') }) }) : null,
        h('pre', { class: 'content domain prompt', lang: set.language, tabindex: '0', 'aria-label': t('kn.prompt'), text: r.prompt }));
      announce(t('kn.rendered', { size: fmtBytes(r.bytes) }));
    } catch (e) {
      add(clear(out), h('p', { class: 'error', role: 'alert', text: e.message }));
    }
  } },
    h('div', { class: 'field wide' }, h('label', { for: 'rd-route', text: t('kn.route') }), routeSel),
    fields,
    h('button', { type: 'submit', id: 'rd-submit', class: 'primary', text: t('kn.render') }));
  add(panel, h('h2', { id: 'kn-render-h', text: t('kn.renderTitle') }), h('p', { class: 'muted small', text: t('kn.renderExplain') }), form, out);
}

function makeEditor(state, reload) {
  const title = h('h2', { id: 'ed-h' });
  const dimSel = h('select', { id: 'ed-dim' });
  const valueIn = h('input', { id: 'ed-value', type: 'text', list: 'ed-values', autocomplete: 'off' });
  const values = h('datalist', { id: 'ed-values' });
  const idIn = h('input', { id: 'ed-id', type: 'text', required: true, autocomplete: 'off', spellcheck: 'false' });
  const tagsIn = h('input', { id: 'ed-tags', type: 'text', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'ed-tags-hint' });
  const tagsHint = h('p', { id: 'ed-tags-hint', class: 'muted small' });
  const textIn = h('textarea', { id: 'ed-text', rows: '12', spellcheck: 'false' });
  const result = h('div', { class: 'ed-result', 'aria-live': 'polite' });
  const disableBtn = h('button', { type: 'button', id: 'ed-disable', text: t('kn.disable') });
  const revertBtn = h('button', { type: 'button', id: 'ed-revert', text: t('kn.revert') });
  const previewBtn = h('button', { type: 'button', id: 'ed-preview', text: t('kn.preview') });
  const saveBtn = h('button', { type: 'submit', id: 'ed-save', class: 'primary', text: t('kn.save') });
  const closeBtn = h('button', { type: 'button', id: 'ed-close', text: t('kn.close') });
  const scopeRow = h('div', { class: 'row' },
    h('div', { class: 'field' }, h('label', { for: 'ed-dim', text: t('kn.dimension') }), dimSel),
    h('div', { class: 'field grow' }, h('label', { for: 'ed-value', text: t('kn.value') }), valueIn, values));
  const form = h('form', { method: 'dialog', class: 'editor' },
    title, scopeRow,
    h('div', { class: 'field wide' }, h('label', { for: 'ed-id', text: t('kn.id') }), idIn),
    h('div', { class: 'field wide' }, h('label', { for: 'ed-tags', text: t('kn.tags') }), tagsIn, tagsHint),
    h('div', { class: 'field wide' }, h('label', { for: 'ed-text', text: t('kn.text') }), textIn),
    h('div', { class: 'row buttons' }, previewBtn, saveBtn, disableBtn, revertBtn, h('span', { class: 'grow' }), closeBtn),
    result);
  const dialog = h('dialog', { class: 'editor-dialog', 'aria-labelledby': 'ed-h' }, form);
  let current = null;

  function scopeRef() {
    return { dimension: dimSel.value, value: dimSel.value ? valueIn.value.trim() : '' };
  }

  function body(action, dryRun) {
    return {
      action, dry_run: dryRun, scope: scopeRef(), etag: state.data.overlay.etag,
      entry: { id: idIn.value.trim(), tags: tagsIn.value.split(',').map((x) => x.trim()).filter(Boolean), text: textIn.value },
    };
  }

  function showResult(r, written) {
    clear(result);
    if (written) {
      add(result, h('p', { class: 'ok', role: 'status', text: t('kn.saved', { version: r.overlay.version }) }));
    }
    add(result, h('h3', { text: r.builtin ? t('kn.diffBuiltin') : t('kn.diffNew') }));
    if (r.tags_added.length || r.tags_removed.length) {
      add(result, h('p', null, r.tags_added.map((x) => h('ins', { class: 'tag', text: '+' + x })), ' ', r.tags_removed.map((x) => h('del', { class: 'tag', text: '−' + x }))));
    }
    add(result, r.after ? diffView(r.text_diff) : h('p', { class: 'muted', text: t('kn.removed') }));
  }

  function showError(e) {
    clear(result);
    const probs = e.body && e.body.problems;
    add(result, h('div', { class: 'error', role: 'alert' }, h('p', { text: e.message }),
      probs && probs.length ? h('ul', null, probs.map((p) => h('li', { text: [p.scope, p.entry && `"${p.entry}"`, p.field, p.problem].filter(Boolean).join(' · ') }))) : null));
  }

  async function send(action, dryRun) {
    try {
      const r = await api('/factgate/v1/knowledge/sets/' + encodeURIComponent(state.set) + '/entries', { method: 'POST', body: body(action, dryRun) });
      showResult(r, r.written);
      if (r.written) {
        announce(t('kn.saved', { version: r.overlay.version }));
        state.data.overlay.etag = r.overlay.etag;
        await reload();
      }
    } catch (e) {
      showError(e);
    }
  }

  previewBtn.addEventListener('click', () => send('put', true));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); send('put', false); });
  disableBtn.addEventListener('click', () => send('disable', false));
  revertBtn.addEventListener('click', () => send('revert', false));
  closeBtn.addEventListener('click', () => dialog.close());
  dimSel.addEventListener('change', () => fillValues());

  function fillValues() {
    const set = state.info.sets.find((s) => s.name === state.set);
    const dim = set && set.dimensions.find((d) => d.name === dimSel.value);
    add(clear(values), ...(dim ? dim.values : []).map((v) => h('option', { value: v })));
    valueIn.disabled = !dimSel.value;
  }

  function open(entry, sc) {
    const set = state.info.sets.find((s) => s.name === state.set);
    current = entry;
    clear(result);
    title.textContent = entry ? t('kn.editTitle', { id: entry.id }) : t('kn.newTitle', { set: state.set });
    add(clear(dimSel), h('option', { value: '', text: t('kn.global') }), ...set.dimensions.map((d) => h('option', { value: d.name, text: d.name })));
    dimSel.value = sc ? sc.dimension : '';
    valueIn.value = sc ? sc.value : '';
    fillValues();
    dimSel.disabled = !!entry;
    valueIn.disabled = !!entry || !dimSel.value;
    idIn.value = entry ? entry.id : '';
    idIn.readOnly = !!entry;
    tagsIn.value = entry ? entry.tags.join(', ') : '';
    textIn.value = entry ? entry.text : '';
    textIn.setAttribute('lang', set.language);
    tagsHint.textContent = t('kn.tagsHint', { tags: set.tags.join(', ') });
    disableBtn.hidden = !entry || entry.origin === 'disabled';
    revertBtn.hidden = !entry || entry.origin === 'builtin';
    dialog.showModal();
    (entry ? textIn : idIn).focus();
  }

  return { dialog, open, get current() { return current; } };
}
