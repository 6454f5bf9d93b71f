package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/telemetry"
)

// The browser suite: the console's pages in headless Chromium (Debian's
// chromium, driven over the DevTools protocol by chromedp) against a proxy with
// the mock upstream. It is the only browser test, so CI starts one browser.
//
// It skips when no Chromium can be found ($FACTGATE_CHROMIUM, chromium,
// chromium-browser, google-chrome). With FACTGATE_CONSOLE_SCREENSHOTS=DIR it
// saves a screenshot of each page there (the README's, in docs/console):
//
//	FACTGATE_CONSOLE_SCREENSHOTS=$PWD/docs/console go test ./proxy/console -run TestBrowser

func findChromium() string {
	if p := os.Getenv("FACTGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type browser struct {
	t       *testing.T
	ctx     context.Context
	f       *fixture
	shots   string
	mu      sync.Mutex
	errs    []string
	stepDue time.Duration
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.stepDue)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v%s", what, err, b.jsErrors())
	}
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.stepDue)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v%s", expr, err, b.jsErrors())
	}
	return v
}

// until polls a JavaScript condition in the page.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.stepDue)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(b.stepDue))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.querySelector("main").innerText.slice(0, 800)`))
		b.t.Fatalf("waiting for %s (%s): %v%s\npage: %s", what, expr, err, b.jsErrors(), page)
	}
}

// act runs a JavaScript action on the element sel as soon as it is in the page
// and shown. The query and the action run in one turn of the page's event loop:
// the pages re-render as data arrives (the live request list, a form after its
// answer), and a node looked up first and acted on later over the DevTools
// protocol may be gone by then — chromedp's node actions failed so under load
// ("Could not find node with given id").
func (b *browser) act(what, sel, action string) {
	b.t.Helper()
	b.until(what, `(() => { const e = document.querySelector(`+js(sel)+`);
		if (!e || !e.isConnected || e.getClientRects().length === 0) return false;
		`+action+`; return true; })()`)
}

// click clicks the element sel once it is shown.
func (b *browser) click(what, sel string) { b.t.Helper(); b.act(what, sel, "e.click()") }

// setValue sets a field's value and tells the page, as typing and leaving it do.
func (b *browser) setValue(what, sel, value string) {
	b.t.Helper()
	b.act(what, sel, `e.focus(); e.value = `+js(value)+`; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true}))`)
}

// focus moves the keyboard focus to sel.
func (b *browser) focus(what, sel string) {
	b.t.Helper()
	b.act(what, sel, "e.focus()")
}

// scrollTo scrolls sel into view (for the screenshots).
func (b *browser) scrollTo(what, sel string) { b.t.Helper(); b.act(what, sel, "e.scrollIntoView()") }

func (b *browser) jsErrors() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) == 0 {
		return ""
	}
	return "\npage errors:\n" + strings.Join(b.errs, "\n")
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.stepDue)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// js quotes a Go string for JavaScript.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestBrowser(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		t.Skip("no Chromium found (set FACTGATE_CHROMIUM or install Debian's chromium): the console's browser tests did not run")
	}
	// Tracing on: the trace page shows the request's W3C trace.
	f := newFixture(t, fixtureConfig+"telemetry: {enabled: true}\n", proxy.WithTelemetry(telemetry.WithExporter(tracetest.NewInMemoryExporter())))
	// Traffic: revised stories from app and accepted short analyses from other,
	// spread over the experiment's variants by subject.
	var revised []string
	for i := range 6 {
		revised = append(revised, f.story(keyApp, "分析这局录像。", "X-Factgate-Subject", fmt.Sprintf("player-%d", i)))
	}
	for i := range 4 {
		f.story(keyOther, "请简要分析这局录像。", "X-Factgate-Subject", fmt.Sprintf("coach-%d", i))
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(1366, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelAll := context.WithTimeout(ctx, 180*time.Second)
	defer cancelAll()
	b := &browser{t: t, ctx: ctx, f: f, shots: os.Getenv("FACTGATE_CONSOLE_SCREENSHOTS"), stepDue: 45 * time.Second}
	if err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.mu.Lock()
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errs = append(b.errs, fmt.Sprintf("%s:%d:%d: %s", d.URL, d.LineNumber+1, d.ColumnNumber+1, msg))
			b.mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.mu.Lock()
				b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
				b.mu.Unlock()
			}
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}
	b.do("emulating a laptop screen", chromedp.EmulateViewport(1366, 900))

	// Login: the page asks for a key; the admin logs in with it.
	b.do("opening the console", chromedp.Navigate(f.base+"/factgate/ui/"))
	b.until("the login form", `(document.querySelector("#login-key")?.getClientRects().length ?? 0) > 0`)
	b.screenshot("login")
	b.setValue("typing the key", "#login-key", keyOps)
	b.click("logging in", `.login button[type="submit"]`)

	// Requests: the list, newest first; a request finishing now appears live.
	b.until("the request rows", `document.querySelectorAll("table.requests tbody tr").length === 10`)
	if got := eval[string](b, `document.querySelector("#who").textContent`); !strings.Contains(got, "ops") {
		t.Errorf("the header names %q, want the admin ops", got)
	}
	// Keyboard: on a fresh page the first Tab reaches the skip link, which
	// leads to the main content.
	b.do("reloading", chromedp.Reload())
	b.until("the request rows again", `document.querySelectorAll("table.requests tbody tr").length === 10`)
	b.do("tabbing", chromedp.KeyEvent("\t"))
	if got := eval[string](b, `document.activeElement.className + " " + getComputedStyle(document.activeElement).left`); !strings.HasPrefix(got, "skip ") || strings.HasPrefix(got, "skip -") {
		t.Errorf("the first Tab lands on %q, want the skip link, visible", got)
	}
	b.do("skipping", chromedp.KeyEvent("\r"))
	if got := eval[string](b, `document.activeElement.id`); got != "main" {
		t.Errorf("the skip link moved focus to %q, want main", got)
	}
	live := f.story(keyApp, "分析这局录像。", "X-Factgate-Subject", "player-live")
	b.until("the live row", `document.querySelector("table.requests tbody tr").dataset.trace === `+js(live))
	revised = append(revised, live)
	// The row shows the draft's issues → those of the answer as delivered.
	if got := eval[string](b, `document.querySelector("table.requests tbody tr .issues").textContent`); !strings.HasPrefix(got, "C") || !strings.HasSuffix(got, " → 0") {
		t.Errorf("the live row's issues %q, want the draft's Contradiction → 0 delivered", got)
	}
	b.screenshot("requests")

	// A streamed greeting on the validating route is relayed live, not held:
	// it is a request of the console as any other, and its trace tells so.
	status, hdr, raw := f.do("POST", "/v1/chat/completions", keyApp, `{"model":"ra3-analyst","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`)
	relayed := hdr.Get("X-Factgate-Trace-Id")
	if status != 200 || relayed == "" || !strings.Contains(string(raw), "data: [DONE]") {
		t.Fatalf("a streamed greeting: %d %v %.200s", status, hdr, raw)
	}
	b.until("the relayed row", `document.querySelector("table.requests tbody tr").dataset.trace === `+js(relayed))
	b.do("opening the relayed request's trace", chromedp.Navigate(f.base+"/factgate/ui/#/trace/"+relayed))
	b.until("its trace page", `[...document.querySelectorAll("ul.notes li")].some(li => li.textContent.startsWith("relay: "))`)
	if got := eval[int](b, `document.querySelectorAll("mark[class^='sev-']").length`); got != 0 {
		t.Errorf("the relayed request's trace highlights %d claims: nothing was validated", got)
	}
	b.do("back to the requests", chromedp.Navigate(f.base+"/factgate/ui/#/requests"))
	b.until("the request rows once more", `document.querySelector("table.requests tbody tr") !== null`)

	// Filter to revised requests and follow the newest to its trace.
	b.setValue("filtering", "#f-revised", "true")
	b.until("the revised rows", fmt.Sprintf(`document.querySelectorAll("table.requests tbody tr").length === %d`, len(revised)))
	b.click("opening the trace", `table.requests tbody tr:first-child a`)
	b.until("the trace page", `location.hash === "#/trace/" + `+js(live)+` && document.querySelector("mark.sev-Contradiction") !== null`)
	// With tracing on, the factgate trace id is the W3C trace id, shown with the
	// server span's.
	if got := eval[string](b, `(document.querySelector("[data-w3c-trace]") || {dataset: {}}).dataset.w3cTrace || ""`); got != live {
		t.Errorf("the trace page shows W3C trace %q, want the request's %q", got, live)
	}
	if got := eval[string](b, `document.querySelector("mark.sev-Contradiction").textContent`); !strings.Contains(got, "AlliedBomberAircraft") && !strings.Contains(got, "AlliedMCV") {
		t.Errorf("the highlighted claim is %q", got)
	}
	if got := eval[string](b, `[...document.querySelectorAll("pre.diff ins")].map(e => e.textContent).join("|")`); !strings.Contains(got, "战斗机") {
		t.Errorf("the diff's insertions %q lack the correction", got)
	}
	if got := eval[string](b, `document.querySelector("ul.oplines").textContent`); !strings.Contains(got, "6:02") {
		t.Errorf("the cited operation lines %q", got)
	}
	// Every upstream try: the draft's and the revision's, both to the mock.
	if got := eval[string](b, `[...document.querySelectorAll("table.upstream-attempts tbody tr")].map(r => r.cells[1].textContent + "/" + r.cells[4].textContent).join(" ")`); got != "mock/ok mock/ok" {
		t.Errorf("the upstream tries on the trace page: %q, want the draft's and the revision's", got)
	}
	// Keyboard: the path link moves focus to its claim.
	b.focus("focusing an issue's path", `a[data-goto]`)
	b.do("following an issue to its claim", chromedp.KeyEvent("\r"))
	if got := eval[string](b, `document.activeElement.tagName`); got != "MARK" {
		t.Errorf("after Enter on an issue, focus is on %s, want the claim's mark", got)
	}
	b.scrollTo("scrolling to the draft", "#at-h")
	b.screenshot("trace")

	// Experiments: read the headline chart and check it against the report.
	b.do("opening experiments", chromedp.Navigate(f.base+"/factgate/ui/#/experiments"))
	sel := `figure[data-metric="first_draft_contradiction"] g[data-variant="baseline"]`
	b.until("the chart", `document.querySelector(`+js(sel)+`) !== null`)
	label := eval[string](b, `document.querySelector(`+js(sel)+`).getAttribute("aria-label")`)
	rate := eval[string](b, `document.querySelector(`+js(sel)+`).dataset.rate`)
	_, _, rep := f.do("GET", "/factgate/v1/experiments", keyOps, "")
	want := gjson.GetBytes(rep, `experiments.0.variants.#(name=="baseline").rates.first_draft_contradiction`)
	if want.Get("total").Int() == 0 || rate != want.Get("rate").Raw && rate != fmt.Sprint(want.Get("rate").Float()) {
		t.Errorf("the chart's baseline rate %q, the report's %s", rate, want.Raw)
	}
	if !strings.Contains(label, fmt.Sprintf("%d/%d", want.Get("count").Int(), want.Get("total").Int())) || !strings.Contains(label, "[") {
		t.Errorf("the chart reads %q; the report says %s", label, want.Raw)
	}
	if n := eval[int](b, `document.querySelectorAll("table.comparisons tbody tr").length`); n != 3 {
		t.Errorf("%d comparison rows, want 3 (one variant against the control on three rates)", n)
	}
	b.screenshot("experiments")

	// Counts read as English does: one request, not "1 requests".
	plural := func(key string, n int) string {
		ctx, cancel := context.WithTimeout(b.ctx, b.stepDue)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`import("/factgate/ui/i18n.js").then((m) => m.t(%s, {n: %d, kept: 7, size: "1 KiB"}))`, js(key), n), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("translating %s: %v", key, err)
		}
		return got
	}
	for _, c := range []struct {
		key  string
		n    int
		want string
	}{
		{"requests.count", 1, "1 request shown (7 kept on this replica)"},
		{"requests.count", 2, "2 requests shown (7 kept on this replica)"},
		{"requests.new", 1, "1 new request"},
		{"trace.issuesOf", 1, "1 issue"},
		{"kn.count", 1, "1 entry"},
		{"trace.lines", 1, "1 line, 1 KiB"},
	} {
		if got := plural(c.key, c.n); got != c.want {
			t.Errorf("%s with n=%d reads %q, want %q", c.key, c.n, got, c.want)
		}
	}

	// Knowledge opens on the set of the config's pack (the routes' ra3), not on
	// the first pack's (dnd).
	b.do("opening knowledge without a set", chromedp.Navigate(f.base+"/factgate/ui/#/knowledge"))
	b.until("the set chooser", `document.querySelector("#kn-set") !== null`)
	if got := eval[string](b, `document.querySelector("#kn-set").value`); got != "ra3" {
		t.Errorf("the knowledge page opens on set %q, want ra3, the default set of the routes' pack", got)
	}

	// Knowledge: edit the Allied MCV entry, preview the diff, save; the next
	// request's injected prompt carries it, and so does the rendered prompt.
	const fact = "浏览器中的专家修订：展开前必须先移动到开阔地。"
	b.do("opening knowledge", chromedp.Navigate(f.base+"/factgate/ui/#/knowledge?set=ra3&q=AlliedMCV"))
	entry := `article[data-entry="AlliedMCV"][data-scope="factions/盟军"] button`
	b.until("the entry", `document.querySelector(`+js(entry)+`) !== null`)
	b.click("editing", entry)
	b.until("the editor", `(document.querySelector("#ed-text")?.getClientRects().length ?? 0) > 0`)
	text := eval[string](b, `document.querySelector("#ed-text").value`)
	b.setValue("typing", "#ed-text", text+"- "+fact+"\n")
	b.click("previewing", "#ed-preview")
	b.until("the diff against the built-in entry", `[...document.querySelectorAll(".ed-result pre.diff ins")].some(e => e.textContent.includes(`+js(fact)+`))`)
	b.screenshot("knowledge-edit")
	b.click("saving", "#ed-save")
	b.until("the saved message", `document.querySelector(".ed-result .ok") !== null`)
	f.story(keyApp, "分析这局录像。", "X-Factgate-Variant", "baseline")
	if !strings.Contains(f.lastSystemPrompt(), fact) {
		t.Fatal("the next request's injected prompt does not carry the edit made in the browser")
	}
	b.click("closing the editor", "#ed-close")
	b.setValue("choosing the factions", "#rd-factions", "盟军, 苏联")
	b.click("rendering", "#rd-submit")
	b.until("the rendered prompt", `(document.querySelector("pre.prompt") || {}).textContent?.includes(`+js(fact)+`)`)
	b.scrollTo("scrolling to the top", "main h1")
	b.screenshot("knowledge")

	// Chinese: the switch translates the console's own words. It renders the
	// knowledge page again; its sets arrive (held back 1.5 s here) after the
	// reader moved on to the requests, and must not take the page or the URL
	// back (they did: a slow machine failed this test now and then).
	// heldBack counts the knowledge calls held back and those answered: the test
	// waits for the answers to arrive, not for a time.
	eval[bool](b, `(() => { const f = window.fetch; window.slowKnowledge = f; window.heldBack = {sent: 0, answered: 0};
		window.fetch = (u, o) => {
			if (!String(u).includes("/factgate/v1/knowledge")) return f(u, o);
			window.heldBack.sent++;
			return new Promise((r) => setTimeout(r, 1500)).then(() => f(u, o))
				.then(async (res) => { const body = await res.text();
					return new Response(body, {status: res.status, statusText: res.statusText, headers: res.headers}); })
				.finally(() => setTimeout(() => { window.heldBack.answered++; }, 0));
		};
		return true; })()`)
	eval[bool](b, `(s => { s.value = "zh"; return s.dispatchEvent(new Event("change")); })(document.querySelector("#lang"))`)
	b.until("the Chinese navigation", `document.querySelector('#nav a[data-page="requests"]').textContent === "请求"`)
	b.do("opening requests in Chinese", chromedp.Navigate(f.base+"/factgate/ui/#/requests"))
	b.until("the Chinese requests page", `document.querySelector("main h1").textContent === "最近的请求"`)
	b.until("the held-back knowledge answers", `window.heldBack.sent > 0 && window.heldBack.answered === window.heldBack.sent`)
	// The page handles an answer in the tasks after it arrives; two frames later
	// it has rendered whatever it was going to.
	frames, cancelFrames := context.WithTimeout(b.ctx, b.stepDue)
	_, err := chromedp.Run(frames, chromedp.Evaluate[bool](`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise))
	cancelFrames()
	if err != nil {
		t.Fatalf("waiting two frames: %v", err)
	}
	if got := eval[string](b, `location.hash + " " + [...document.querySelectorAll("main h1")].map((e) => e.textContent).join(" + ")`); got != "#/requests 最近的请求" {
		t.Errorf("after the knowledge page's late answer the console shows %q, want the requests page", got)
	}
	eval[bool](b, `(() => { window.fetch = window.slowKnowledge; return true; })()`)
	eval[bool](b, `(s => { s.value = "en"; return s.dispatchEvent(new Event("change")); })(document.querySelector("#lang"))`)

	if e := b.jsErrors(); e != "" {
		t.Fatalf("the pages raised errors:%s", e)
	}
}
