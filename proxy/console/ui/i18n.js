// The console's own words in English and Chinese. Domain text — issue messages,
// knowledge entries, the injected prompt — is shown in the pack's language as
// factgate produces it.

const en = {
  skip: 'Skip to content', nav: 'Console', 'nav.requests': 'Requests', 'nav.experiments': 'Experiments', 'nav.knowledge': 'Knowledge',
  language: 'Language', logout: 'Log out', loading: 'Loading…', notFound: 'No such page', yes: 'yes', no: 'no',
  'who.readonly': 'Read-only', 'who.adminLogin': 'log in as admin', 'who.admin': 'admin',
  'login.title': 'Log in to the factgate console', 'login.key': 'Client key',
  'login.explain': 'Use the client key you send as Authorization: Bearer. The browser keeps a session cookie; the key itself is not stored. An admin key may also read every client\'s requests and edit knowledge.',
  'login.submit': 'Log in', 'login.invalid': 'That key is not valid.',
  'filter.label': 'Filter requests', 'filter.any': 'Any', 'filter.revised': 'Revised', 'filter.minSeverity': 'Draft issue at least', 'filter.q': 'Search', 'filter.qHint': 'trace id, model, set…',
  'col.time': 'Time', 'col.route': 'Route', 'col.variant': 'Variant', 'col.client': 'Client', 'col.status': 'Status', 'col.issues': 'Issues draft → delivered',
  'col.outcome': 'Outcome', 'col.revisions': 'Revisions', 'col.tokens': 'Tokens', 'col.latency': 'Latency',
  'status.ok': 'Succeeded', 'status.error': 'Failed',
  'outcome.accepted': 'accepted', 'outcome.resolved': 'resolved', 'outcome.improved': 'improved', 'outcome.downgraded': 'downgraded', 'outcome.failed': 'failed',
  'sev.Info': 'Info', 'sev.WeakEvidence': 'Weak evidence', 'sev.Warning': 'Warning', 'sev.Contradiction': 'Contradiction', 'sev.Fatal': 'Fatal',
  'requests.title': 'Recent requests', 'requests.caption': 'Recent intercepted requests, newest first',
  'requests.perReplica': 'The requests this replica served, newest first, live. Each replica keeps its own list; traces are shared by all replicas.',
  'requests.live': 'Live', 'requests.older': 'Load older', 'requests.none': 'No request matches yet.',
  'requests.count': '{n} requests shown ({kept} kept on this replica)', 'requests.new': '{n} new requests',
  'requests.count.one': '1 request shown ({kept} kept on this replica)', 'requests.new.one': '1 new request',
  'requests.open': 'Open the trace of the request at {time} on {route}', 'requests.notValidated': 'not validated',
  'requests.issuesLabel': 'Issues: draft {draft}, delivered {delivered}',
  'trace.title': 'Trace', 'trace.back': 'Requests', 'trace.notFound': 'No trace {id}: it expired, or it belongs to another client.',
  'trace.overview': 'Overview', 'trace.model': 'Model', 'trace.issues': 'Issues', 'trace.delivered': 'Issues delivered', 'trace.set': 'Knowledge set',
  'trace.w3c': 'OpenTelemetry', 'trace.w3cValue': 'trace {trace} · span {span}',
  'trace.scopes': 'Scopes', 'trace.session': 'Session', 'trace.prompt': 'prompt', 'trace.completion': 'completion', 'trace.incomplete': 'Validation incomplete',
  'trace.request': 'The client\'s request', 'trace.noRequest': 'This trace did not keep the request (console.request_bytes or traces.content).',
  'trace.cut': '{kept} of {total} kept', 'trace.lines': '{n} lines, {size}', 'trace.lines.one': '1 line, {size}',
  'trace.attempts': 'Draft and revisions', 'trace.noAttempts': 'The answer was not validated.', 'trace.perAttempt': 'Per attempt: tokens and timings',
  'trace.kind': 'Attempt', 'trace.duration': 'Duration', 'trace.requestBytes': 'Request size',
  'trace.draft': 'Draft', 'trace.revision': 'Revision {n}', 'trace.repair': 'Repair {n}', 'trace.returned': 'returned', 'trace.failed': 'call failed', 'trace.leaked': 'mentions the revision',
  'trace.callFailed': 'The call failed: {error}', 'trace.answerOf': 'Answer of the {what}', 'trace.noContent': 'The trace kept no answer text (traces.content: false).',
  'trace.issuesOf': '{n} issues', 'trace.issuesOf.one': '1 issue', 'trace.goto': 'Show claim {path}', 'trace.recommendation': 'Recommended:', 'trace.level': 'evidence level', 'trace.alternatives': 'alternatives',
  'trace.cites': 'Operation lines it cites:',
  'trace.diff': 'From draft to the answer returned', 'trace.draftReturned': 'The draft itself was returned: nothing changed.',
  'trace.diffExplain': 'Removed text is struck through, added text underlined; the {to} was returned (before its claims were downgraded).',
  'trace.downgrades': 'Downgrades', 'trace.noDowngrades': 'No claim was downgraded.', 'trace.claim': 'Claim', 'trace.from': 'From', 'trace.to': 'To',
  'trace.removedClaim': 'removed from the claims', 'trace.removeClaim': 'remove the claim',
  'trace.notice': 'Notice to the reader', 'trace.timings': 'Timings', 'trace.notes': 'Notes', 'trace.raw': 'Trace as JSON',
  'trace.upstream': 'Upstream calls', 'trace.upstreamTries': 'Every try of every upstream call: retries, fallbacks, upstreams skipped', 'trace.upstreamName': 'Upstream', 'trace.key': 'Key', 'trace.wait': 'Waited', 'trace.error': 'Error',
  'trace.hiddenCalls': 'Hidden calls that gave no answer (judges)', 'trace.validator': 'Validator',
  'diff.removed': 'removed: ', 'diff.added': 'added: ',
  'exp.title': 'Experiments', 'exp.explain': 'Per variant: rates with 95% Wilson intervals, tokens, latency and assignment; each variant against the control with a two-proportion z-test. Forced requests are counted apart.',
  'exp.none': 'No route runs an experiment.', 'exp.sub': 'route {route} · control {control}', 'exp.variants': 'Variants',
  'exp.share': 'Configured share', 'exp.observed': 'Observed share', 'exp.requests': 'Requests', 'exp.forced': 'Forced (not counted)', 'exp.validated': 'Validated drafts', 'exp.hidden': 'Hidden calls',
  'exp.control': 'control', 'exp.noData': 'no data yet',
  'rate.first_draft_contradiction': 'First-draft contradiction', 'rate.first_draft_contradiction.of': 'of validated drafts',
  'rate.revision': 'Revised', 'rate.revision.of': 'of validated drafts',
  'rate.residual_contradiction': 'Residual contradiction', 'rate.residual_contradiction.of': 'of validated drafts',
  'rate.resolved': 'Resolved', 'rate.resolved.of': 'of drafts that triggered a revision',
  'rate.downgrade': 'Downgraded', 'rate.downgrade.of': 'of validated drafts',
  'exp.tokens': 'Tokens per answer', 'exp.tokensNote': 'mean; the darker part is the draft', 'exp.tokensRow': '{mean} (draft {draft})',
  'exp.latency': 'Latency', 'exp.latencyNote': 'mean; the mark is the p95 bucket bound', 'exp.latencyRow': 'mean {mean}, p95 ≤ {p95}',
  'exp.shares': 'Assignment', 'exp.sharesNote': 'observed share; the mark is the configured one', 'exp.sharesRow': '{observed} (configured {configured})',
  'exp.comparisons': 'Against the control {control} (variant − control, 95% Newcombe interval)', 'exp.metric': 'Rate', 'exp.difference': 'Difference',
  'exp.interval': '95% interval', 'exp.reading': 'Reading', 'exp.noSig': 'no significant difference', 'exp.lower': 'lower (significant at 5%)', 'exp.higher': 'higher (significant at 5%)',
  'kn.title': 'Knowledge', 'kn.browse': 'Browse', 'kn.set': 'Knowledge set', 'kn.scope': 'Scope', 'kn.tag': 'Tag', 'kn.search': 'Search', 'kn.searchHint': 'id, text or tag',
  'kn.allScopes': 'All scopes', 'kn.global': 'global', 'kn.count': '{n} entries', 'kn.count.one': '1 entry', 'kn.new': 'New entry',
  'kn.noOverlay': 'No overlay file is configured for {set}: entries cannot be edited here (knowledge.overlays).',
  'kn.overlay': 'Overlay version {version}', 'kn.overlayAbsent': '(the file does not exist yet)', 'kn.overlayError': 'The overlay file is invalid; the last good version is in effect: {error}',
  'kn.edit': 'Edit', 'kn.editEntry': 'Edit {id}',
  'origin.builtin': 'built-in', 'origin.overridden': 'overridden', 'origin.added': 'added', 'origin.disabled': 'disabled',
  'kn.renderTitle': 'Rendered prompt', 'kn.renderExplain': 'The system prompt for a context exactly as the route injects it (knowledge, contract, rules), with the overlay in effect.',
  'kn.route': 'Route', 'kn.knowledgeOnly': 'Knowledge only', 'kn.add': 'Add a {dim} value', 'kn.factionsHint': 'Comma-separated, in player order.', 'kn.valuesHint': 'Comma-separated.',
  'kn.render': 'Render', 'kn.asInjected': 'As route {route} injects it', 'kn.knowledgeOnlyNote': 'The rendered knowledge alone', 'kn.prompt': 'Rendered prompt',
  'kn.unknownScopes': 'The set has no {list}: skipped, as on a request.', 'kn.rendered': 'Rendered, {size}',
  'kn.editTitle': 'Edit {id}', 'kn.newTitle': 'New entry in {set}', 'kn.dimension': 'Scope dimension', 'kn.value': 'Scope value', 'kn.id': 'Id', 'kn.tags': 'Tags',
  'kn.tagsHint': 'Comma-separated. Allowed: {tags}, specialPower:<Name>.', 'kn.text': 'Text (markdown, rendered as is)',
  'kn.preview': 'Preview changes', 'kn.save': 'Save to overlay', 'kn.disable': 'Disable entry', 'kn.revert': 'Revert to built-in', 'kn.close': 'Close',
  'kn.saved': 'Saved: overlay version {version} is in effect; the next request carries it.',
  'kn.diffBuiltin': 'Against the built-in entry', 'kn.diffNew': 'New entry (no built-in entry)', 'kn.removed': 'The entry is no longer in the effective set.',
};

const zh = {
  skip: '跳到正文', nav: '控制台', 'nav.requests': '请求', 'nav.experiments': '实验', 'nav.knowledge': '知识库',
  language: '语言', logout: '退出登录', loading: '加载中…', notFound: '没有这个页面', yes: '是', no: '否',
  'who.readonly': '只读', 'who.adminLogin': '以管理员登录', 'who.admin': '管理员',
  'login.title': '登录 factgate 控制台', 'login.key': '客户端密钥',
  'login.explain': '使用你在 Authorization: Bearer 中发送的客户端密钥。浏览器只保存会话 Cookie，不保存密钥。管理员密钥还可以查看所有客户端的请求并编辑知识库。',
  'login.submit': '登录', 'login.invalid': '密钥无效。',
  'filter.label': '筛选请求', 'filter.any': '全部', 'filter.revised': '已修订', 'filter.minSeverity': '初稿问题至少为', 'filter.q': '搜索', 'filter.qHint': 'trace id、模型、知识集…',
  'col.time': '时间', 'col.route': '路由', 'col.variant': '变体', 'col.client': '客户端', 'col.status': '状态', 'col.issues': '问题 初稿 → 交付',
  'col.outcome': '结果', 'col.revisions': '修订次数', 'col.tokens': 'Token', 'col.latency': '延迟',
  'status.ok': '成功', 'status.error': '失败',
  'outcome.accepted': '直接通过', 'outcome.resolved': '已修正', 'outcome.improved': '已改善', 'outcome.downgraded': '已降级', 'outcome.failed': '修订失败',
  'sev.Info': '提示', 'sev.WeakEvidence': '证据不足', 'sev.Warning': '警告', 'sev.Contradiction': '矛盾', 'sev.Fatal': '致命',
  'requests.title': '最近的请求', 'requests.caption': '最近被拦截的请求，最新的在前',
  'requests.perReplica': '本副本处理过的请求，最新的在前，实时更新。每个副本各自保存列表；trace 由所有副本共享。',
  'requests.live': '实时', 'requests.older': '加载更早的', 'requests.none': '还没有符合条件的请求。',
  'requests.count': '显示 {n} 个请求（本副本保留 {kept} 个）', 'requests.new': '{n} 个新请求',
  'requests.count.one': '显示 1 个请求（本副本保留 {kept} 个）', 'requests.new.one': '1 个新请求',
  'requests.open': '打开 {time} 在 {route} 上的请求的 trace', 'requests.notValidated': '未验证',
  'requests.issuesLabel': '问题：初稿 {draft}，交付 {delivered}',
  'trace.title': 'Trace', 'trace.back': '请求列表', 'trace.notFound': '没有 trace {id}：已过期，或属于其他客户端。',
  'trace.overview': '概览', 'trace.model': '模型', 'trace.issues': '问题', 'trace.delivered': '交付答案中的问题', 'trace.set': '知识集',
  'trace.w3c': 'OpenTelemetry', 'trace.w3cValue': 'trace {trace} · span {span}',
  'trace.scopes': '范围', 'trace.session': '会话', 'trace.prompt': '提示', 'trace.completion': '生成', 'trace.incomplete': '验证不完整',
  'trace.request': '客户端的请求', 'trace.noRequest': '这个 trace 没有保存请求（console.request_bytes 或 traces.content）。',
  'trace.cut': '保留了 {total} 中的 {kept}', 'trace.lines': '{n} 行，{size}', 'trace.lines.one': '1 行，{size}',
  'trace.attempts': '初稿与修订', 'trace.noAttempts': '答案没有经过验证。', 'trace.perAttempt': '每次调用：token 与耗时',
  'trace.kind': '调用', 'trace.duration': '耗时', 'trace.requestBytes': '请求大小',
  'trace.draft': '初稿', 'trace.revision': '第 {n} 次修订', 'trace.repair': '补全 {n}', 'trace.returned': '已返回', 'trace.failed': '调用失败', 'trace.leaked': '提到了修订',
  'trace.callFailed': '调用失败：{error}', 'trace.answerOf': '{what}的答案', 'trace.noContent': '这个 trace 没有保存答案文本（traces.content: false）。',
  'trace.issuesOf': '{n} 个问题', 'trace.issuesOf.one': '1 个问题', 'trace.goto': '查看声明 {path}', 'trace.recommendation': '建议：', 'trace.level': '证据等级', 'trace.alternatives': '备选',
  'trace.cites': '引用的操作行：',
  'trace.diff': '从初稿到返回的答案', 'trace.draftReturned': '返回的就是初稿：没有改动。',
  'trace.diffExplain': '删除的文字带删除线，新增的带下划线；返回的是{to}（声明降级之前）。',
  'trace.downgrades': '降级', 'trace.noDowngrades': '没有声明被降级。', 'trace.claim': '声明', 'trace.from': '原等级', 'trace.to': '降为',
  'trace.removedClaim': '已从声明中删除', 'trace.removeClaim': '删除这条声明',
  'trace.notice': '给读者的提示', 'trace.timings': '耗时', 'trace.notes': '备注', 'trace.raw': 'Trace JSON',
  'trace.upstream': '上游调用', 'trace.upstreamTries': '每次上游调用的每一次尝试：重试、回退、被跳过的上游', 'trace.upstreamName': '上游', 'trace.key': '密钥', 'trace.wait': '等待', 'trace.error': '错误',
  'trace.hiddenCalls': '不产生答案的隐藏调用（评审）', 'trace.validator': '验证器',
  'diff.removed': '删除：', 'diff.added': '新增：',
  'exp.title': '实验', 'exp.explain': '每个变体的比率及 95% Wilson 区间、token、延迟和分配比例；每个变体与对照组做双比例 z 检验。强制指定的请求单独计数。',
  'exp.none': '没有路由在运行实验。', 'exp.sub': '路由 {route} · 对照组 {control}', 'exp.variants': '变体',
  'exp.share': '配置比例', 'exp.observed': '实际比例', 'exp.requests': '请求数', 'exp.forced': '强制（不计入）', 'exp.validated': '已验证初稿', 'exp.hidden': '隐藏调用',
  'exp.control': '对照组', 'exp.noData': '暂无数据',
  'rate.first_draft_contradiction': '初稿矛盾率', 'rate.first_draft_contradiction.of': '占已验证初稿',
  'rate.revision': '修订率', 'rate.revision.of': '占已验证初稿',
  'rate.residual_contradiction': '残留矛盾率', 'rate.residual_contradiction.of': '占已验证初稿',
  'rate.resolved': '修正率', 'rate.resolved.of': '占触发修订的初稿',
  'rate.downgrade': '降级率', 'rate.downgrade.of': '占已验证初稿',
  'exp.tokens': '每个答案的 token', 'exp.tokensNote': '平均值；深色部分是初稿', 'exp.tokensRow': '{mean}（初稿 {draft}）',
  'exp.latency': '延迟', 'exp.latencyNote': '平均值；标记为 p95 所在区间上界', 'exp.latencyRow': '平均 {mean}，p95 ≤ {p95}',
  'exp.shares': '分配', 'exp.sharesNote': '实际比例；标记为配置比例', 'exp.sharesRow': '{observed}（配置 {configured}）',
  'exp.comparisons': '与对照组 {control} 比较（变体 − 对照，95% Newcombe 区间）', 'exp.metric': '比率', 'exp.difference': '差值',
  'exp.interval': '95% 区间', 'exp.reading': '解读', 'exp.noSig': '无显著差异', 'exp.lower': '更低（5% 水平显著）', 'exp.higher': '更高（5% 水平显著）',
  'kn.title': '知识库', 'kn.browse': '浏览', 'kn.set': '知识集', 'kn.scope': '范围', 'kn.tag': '标签', 'kn.search': '搜索', 'kn.searchHint': 'id、文本或标签',
  'kn.allScopes': '所有范围', 'kn.global': '通用', 'kn.count': '{n} 条', 'kn.count.one': '1 条', 'kn.new': '新建条目',
  'kn.noOverlay': '{set} 没有配置覆盖文件：这里不能编辑（knowledge.overlays）。',
  'kn.overlay': '覆盖文件版本 {version}', 'kn.overlayAbsent': '（文件尚不存在）', 'kn.overlayError': '覆盖文件无效，仍在使用上一个有效版本：{error}',
  'kn.edit': '编辑', 'kn.editEntry': '编辑 {id}',
  'origin.builtin': '内置', 'origin.overridden': '已覆盖', 'origin.added': '新增', 'origin.disabled': '已停用',
  'kn.renderTitle': '渲染后的提示词', 'kn.renderExplain': '某个上下文下路由实际注入的系统提示词（知识、契约、规则），包含当前生效的覆盖文件。',
  'kn.route': '路由', 'kn.knowledgeOnly': '仅知识', 'kn.add': '添加 {dim} 值', 'kn.factionsHint': '逗号分隔，按玩家顺序。', 'kn.valuesHint': '逗号分隔。',
  'kn.render': '渲染', 'kn.asInjected': '路由 {route} 实际注入的内容', 'kn.knowledgeOnlyNote': '仅渲染后的知识', 'kn.prompt': '渲染后的提示词',
  'kn.unknownScopes': '知识集中没有 {list}：和请求时一样被跳过。', 'kn.rendered': '已渲染，{size}',
  'kn.editTitle': '编辑 {id}', 'kn.newTitle': '在 {set} 中新建条目', 'kn.dimension': '范围维度', 'kn.value': '范围值', 'kn.id': 'Id', 'kn.tags': '标签',
  'kn.tagsHint': '逗号分隔。可用：{tags}，specialPower:<名称>。', 'kn.text': '文本（markdown，原样渲染）',
  'kn.preview': '预览改动', 'kn.save': '保存到覆盖文件', 'kn.disable': '停用条目', 'kn.revert': '恢复内置版本', 'kn.close': '关闭',
  'kn.saved': '已保存：覆盖文件版本 {version} 已生效，下一个请求就会使用它。',
  'kn.diffBuiltin': '与内置条目比较', 'kn.diffNew': '新条目（没有内置条目）', 'kn.removed': '该条目已不在生效的知识集中。',
};

const dicts = { en, zh };
let current = pick();

function pick() {
  const saved = localStorage.getItem('factgate.lang');
  if (saved && dicts[saved]) return saved;
  return (navigator.language || '').toLowerCase().startsWith('zh') ? 'zh' : 'en';
}

export function lang() { return current; }

export function setLang(l) {
  if (!dicts[l]) return;
  current = l;
  localStorage.setItem('factgate.lang', l);
}

// t translates key with vars filled in; with vars.n === 1 it takes the key's
// singular form (key + '.one') when the language has one ("1 request shown").
export function t(key, vars) {
  if (vars && vars.n === 1 && dicts[current][key + '.one'] !== undefined) key += '.one';
  let s = dicts[current][key] ?? en[key] ?? key;
  if (vars) s = s.replace(/\{(\w+)\}/g, (m, k) => (vars[k] !== undefined ? String(vars[k]) : m));
  return s;
}

// applyStatic translates the page's fixed markup (data-i18n attributes).
export function applyStatic() {
  document.documentElement.lang = current === 'zh' ? 'zh-CN' : 'en';
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-aria]')) el.setAttribute('aria-label', t(el.dataset.i18nAria));
}

// keys lists every key of a language (the tests hold both languages complete).
export function keys(l) { return Object.keys(dicts[l]); }
