package console_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestLoginSessionLogout: a client key logs in once; the session cookie is
// HttpOnly and SameSite=Strict and works on the API; a wrong key, a login or
// logout without the console header, and a request after logout are refused.
func TestLoginSessionLogout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")

	status, _, b := f.do("POST", "/factgate/v1/session", "", `{"key": "sk-wrong"}`, "X-Factgate-Console", "1")
	if status != 401 || gjson.GetBytes(b, "error.code").Str != "invalid_api_key" {
		t.Fatalf("a wrong key: %d %s", status, b)
	}
	if !strings.Contains(f.logs.String(), "console login failed") {
		t.Fatal("a failed login is not logged")
	}
	if status, _, b := f.do("POST", "/factgate/v1/session", "", `{"key": "`+keyApp+`"}`); status != 403 || !strings.Contains(string(b), "X-Factgate-Console") {
		t.Fatalf("a login without the console header (another site's form): %d %s", status, b)
	}

	status, h, b := f.do("POST", "/factgate/v1/session", "", `{"key": "`+keyApp+`"}`, "X-Factgate-Console", "1")
	if status != 200 || gjson.GetBytes(b, "name").Str != "app" || gjson.GetBytes(b, "admin").Bool() || gjson.GetBytes(b, "can_edit").Bool() {
		t.Fatalf("login: %d %s", status, b)
	}
	cookie := h.Get("Set-Cookie")
	for _, want := range []string{"factgate_session=", "HttpOnly", "SameSite=Strict", "path=/factgate/", "max-age="} {
		if !strings.Contains(strings.ToLower(cookie), strings.ToLower(want)) {
			t.Fatalf("the session cookie lacks %s: %s", want, cookie)
		}
	}
	if strings.Contains(cookie, keyApp) {
		t.Fatal("the cookie carries the key")
	}

	c := f.browser(keyApp)
	if status, _, b := doWith(t, c, "GET", f.base+"/factgate/v1/requests", "", ""); status != 200 {
		t.Fatalf("the API with the session cookie: %d %s", status, b)
	}
	// The existing API accepts the cookie too.
	if status, _, b := doWith(t, c, "GET", f.base+"/factgate/v1/experiments", "", ""); status != 200 {
		t.Fatalf("the experiment report with the session cookie: %d %s", status, b)
	}
	if status, _, _ := doWith(t, c, "DELETE", f.base+"/factgate/v1/session", "", ""); status != 403 {
		t.Fatalf("a logout without the console header: %d, want 403", status)
	}
	if status, _, _ := doWith(t, c, "DELETE", f.base+"/factgate/v1/session", "", "", "X-Factgate-Console", "1"); status != 204 {
		t.Fatalf("logout: %d", status)
	}
	status, _, b = doWith(t, c, "GET", f.base+"/factgate/v1/requests", "", "")
	if status != 401 {
		t.Fatalf("after logout: %d %s", status, b)
	}
	if status, _, b := f.do("GET", "/factgate/v1/requests", "", ""); status != 401 || gjson.GetBytes(b, "error.code").Str != "missing_api_key" {
		t.Fatalf("no key and no cookie: %d %s", status, b)
	}
	if status, _, _ := f.do("GET", "/factgate/v1/requests", "sk-nope", ""); status != 401 {
		t.Fatalf("a wrong Bearer key: %d", status)
	}
}

type listed struct {
	Requests []struct {
		Seq         uint64 `json:"seq"`
		TraceID     string `json:"trace_id"`
		Client      string `json:"client"`
		Route       string `json:"route"`
		Variant     string `json:"variant"`
		Outcome     string `json:"outcome"`
		DraftIssues string `json:"draft_issues"`
		FinalIssues string `json:"final_issues"`
		Delivered   string `json:"delivered_issues"`
		Revisions   int    `json:"revisions"`
		Status      int    `json:"status"`
		Tokens      struct {
			Total int `json:"total_tokens"`
		} `json:"tokens"`
	} `json:"requests"`
	Clients []string `json:"clients"`
}

func (f *fixture) list(key, query string) listed {
	f.t.Helper()
	status, _, b := f.do("GET", "/factgate/v1/requests"+query, key, "")
	if status != 200 {
		f.t.Fatalf("GET /factgate/v1/requests%s: %d %s", query, status, b)
	}
	var l listed
	if err := json.Unmarshal(b, &l); err != nil {
		f.t.Fatal(err)
	}
	return l
}

func ids(l listed) []string {
	var out []string
	for _, r := range l.Requests {
		out = append(out, r.TraceID)
	}
	return out
}

// TestRequestsListOwnershipAndFilters: each client sees only its own requests,
// the admin sees all (with the clients for the filter), newest first; the
// filters narrow the list; a bad filter is a 400 naming it.
func TestRequestsListOwnershipAndFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	revised := f.story(keyApp, "分析这局录像。", "X-Factgate-Variant", "baseline")
	accepted := f.story(keyOther, "请简要分析这局录像。")
	plainStatus, _, _ := f.do("POST", "/v1/chat/completions", keyApp, `{"model": "plain", "messages": [{"role": "user", "content": "hi"}]}`)
	if plainStatus != 200 {
		t.Fatalf("plain route: %d", plainStatus)
	}
	waitFor(t, "both requests in the list", func() bool { return len(f.list(keyOps, "").Requests) == 2 })

	all := f.list(keyOps, "")
	if got := ids(all); got[0] != accepted || got[1] != revised {
		t.Fatalf("admin list: %v, want newest first [%s %s]", got, accepted, revised)
	}
	if strings.Join(all.Clients, ",") != "other,app" {
		t.Fatalf("admin's client menu: %v", all.Clients)
	}
	r := all.Requests[1]
	if r.Client != "app" || r.Route != "ra3-analyst" || r.Variant != "baseline" || r.Outcome != "resolved" || r.Revisions != 1 ||
		!strings.HasPrefix(r.DraftIssues, "C") || r.FinalIssues == r.DraftIssues || r.Status != 200 || r.Tokens.Total == 0 {
		t.Fatalf("the revised request's summary: %+v", r)
	}
	if got := ids(f.list(keyApp, "")); len(got) != 1 || got[0] != revised {
		t.Fatalf("app sees %v, want only its own %s", got, revised)
	}
	if got := ids(f.list(keyOther, "")); len(got) != 1 || got[0] != accepted {
		t.Fatalf("other sees %v, want only its own %s", got, accepted)
	}
	if l := f.list(keyApp, ""); l.Clients != nil {
		t.Fatalf("a client is shown the other clients: %v", l.Clients)
	}
	if got := ids(f.list(keyApp, "?client=other")); len(got) != 0 {
		t.Fatalf("a client filtering for another client's requests got %v", got)
	}

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"?revised=true", []string{revised}},
		{"?revised=false", []string{accepted}},
		{"?min_severity=Contradiction", []string{revised}},
		{"?outcome=resolved", []string{revised}},
		{"?variant=baseline", []string{revised}},
		{"?client=other", []string{accepted}},
		{"?status=error", nil},
		{"?status=200", []string{accepted, revised}},
		{"?route=plain", nil},
		{"?q=" + accepted[:10], []string{accepted}},
		{"?limit=1", []string{accepted}},
	} {
		if got := ids(f.list(keyOps, tc.query)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v, want %v", tc.query, got, tc.want)
		}
	}
	seq := all.Requests[0].Seq
	if got := ids(f.list(keyOps, "?before="+itoa(seq))); len(got) != 1 || got[0] != revised {
		t.Errorf("before=%d: %v", seq, got)
	}
	for _, q := range []string{"?revised=maybe", "?min_severity=bad", "?status=7xx", "?limit=0"} {
		status, _, b := f.do("GET", "/factgate/v1/requests"+q, keyOps, "")
		if status != 400 || gjson.GetBytes(b, "error.code").Str != "invalid_filter" {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestTraceViewOwnership: the trace page's data — the client's request, every
// attempt with its issues located at their claims, the diff from draft to the
// answer returned — for the owner and the admin; 404 for another client, as
// for a trace that does not exist.
// TestADowngradedAnswerIsListedByWhatWasDelivered: the requests page shows the
// draft's issues → those of the answer as the client received it (after the
// downgrade), X-Factgate-Issues' delivered count, not the returned attempt's
// issues as validated.
func TestADowngradedAnswerIsListedByWhatWasDelivered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	status, h, b := f.do("POST", "/v1/chat/completions", keyApp, storyBody("坚持原稿：分析这局录像。"))
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	id := h.Get("X-Factgate-Trace-Id")
	header := h.Get("X-Factgate-Issues") // draft=…;final=…;delivered=…
	counts := map[string]string{}
	for _, part := range strings.Split(header, ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			counts[k] = v
		}
	}
	if counts["final"] == counts["delivered"] {
		t.Fatalf("X-Factgate-Issues %q: the downgrade changed nothing, the test proves nothing", header)
	}
	waitFor(t, "the request in the list", func() bool { return len(f.list(keyApp, "").Requests) == 1 })
	r := f.list(keyApp, "").Requests[0]
	if r.TraceID != id || r.DraftIssues != counts["draft"] || r.FinalIssues != counts["final"] || r.Delivered != counts["delivered"] {
		t.Fatalf("summary draft %q final %q delivered %q, want X-Factgate-Issues %q", r.DraftIssues, r.FinalIssues, r.Delivered, header)
	}
}

func TestTraceViewOwnership(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	id := f.story(keyApp, "分析这局录像。")
	var b []byte
	waitFor(t, "the trace", func() bool {
		var status int
		status, _, b = f.do("GET", "/factgate/v1/requests/"+id, keyApp, "")
		return status == 200
	})
	v := gjson.ParseBytes(b)
	if v.Get("trace.id").Str != id || v.Get("trace.client_key").Str != "app" || v.Get("summary.trace_id").Str != id {
		t.Fatalf("view: %s", abbreviate(b))
	}
	msgs := v.Get("trace.request.messages").Array()
	if len(msgs) != 2 || msgs[0].Get("role").Str != "system" || !strings.Contains(msgs[1].Get("content").Str, "玩家: PlayerA (盟军)") {
		t.Fatalf("the client's request: %s", v.Get("trace.request").Raw)
	}
	// The 23 KB replay is cut at console.request_bytes (8 KiB), on a character
	// boundary, and says how long it was.
	full := "分析这局录像。\n\n" + replay
	kept := msgs[1].Get("content").Str
	if !msgs[1].Get("truncated").Bool() || msgs[1].Get("bytes").Int() != int64(len(full)) || len(kept) > 8<<10 || len(kept) < 8<<10-4 || !strings.HasPrefix(full, kept) {
		t.Fatalf("the replay in the trace: %d of %d bytes kept (truncated %v), a prefix: %v", len(kept), msgs[1].Get("bytes").Int(), msgs[1].Get("truncated").Bool(), strings.HasPrefix(full, kept))
	}
	if v.Get("returned").Int() != 1 || len(v.Get("attempts").Array()) != 2 {
		t.Fatalf("attempts: returned %d, %d views", v.Get("returned").Int(), len(v.Get("attempts").Array()))
	}
	// The draft's Contradiction about 733 is highlighted at its claim.
	issues := v.Get("trace.attempts.0.issues").Array()
	found := false
	for _, seg := range v.Get("attempts.0.segments").Array() {
		for _, k := range seg.Get("issues").Array() {
			is := issues[k.Int()]
			if strings.Contains(seg.Get("text").Str, "AlliedBomberAircraft") && is.Get("severity").Str == "Contradiction" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no Contradiction located at the bomber claim: %s", v.Get("attempts.0").Raw)
	}
	var joined strings.Builder
	for _, seg := range v.Get("attempts.0.segments").Array() {
		joined.WriteString(seg.Get("text").Str)
	}
	if joined.String() != v.Get("trace.attempts.0.content").Str {
		t.Fatal("the segments do not join to the draft")
	}
	var del, ins string
	for _, op := range v.Get("diff").Array() {
		switch op.Get("op").Str {
		case "del":
			del += op.Get("text").Str
		case "ins":
			ins += op.Get("text").Str
		}
	}
	if !strings.Contains(del, "轰炸机") || !strings.Contains(ins, "战斗机") {
		t.Fatalf("the diff does not show the correction: del %q ins %q", del, ins)
	}

	if status, _, b := f.do("GET", "/factgate/v1/requests/"+id, keyOps, ""); status != 200 {
		t.Fatalf("the admin reading app's trace: %d %s", status, b)
	}
	s1, _, other := f.do("GET", "/factgate/v1/requests/"+id, keyOther, "")
	s2, _, missing := f.do("GET", "/factgate/v1/requests/0123456789abcdef0123456789abcdef", keyOther, "")
	if s1 != 404 || s2 != 404 || gjson.GetBytes(other, "error.code").Str != "trace_not_found" ||
		strings.ReplaceAll(string(other), id, "X") != strings.ReplaceAll(string(missing), "0123456789abcdef0123456789abcdef", "X") {
		t.Fatalf("another client: %d %s; a missing trace: %d %s", s1, other, s2, missing)
	}
}

func abbreviate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// TestLiveFeed: the SSE feed delivers the viewer's own requests as they finish
// (not another client's), and a reconnect with Last-Event-ID gets what it missed.
func TestLiveFeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := f.browser(keyApp)
	req, _ := http.NewRequest("GET", f.base+"/factgate/v1/requests/stream", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan [2]string, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		var id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				events <- [2]string{id, line[6:]}
			}
		}
		close(events)
	}()
	otherID := f.story(keyOther, "请简要分析这局录像。")
	mine := f.story(keyApp, "请简要分析这局录像。")
	var ev [2]string
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	if got := gjson.Get(ev[1], "trace_id").Str; got != mine {
		t.Fatalf("first event is %s, want app's %s (other's was %s)", got, mine, otherID)
	}

	// Reconnect as the browser does, from the event before.
	prev := gjson.Get(ev[1], "seq").Uint() - 1
	req2, _ := http.NewRequest("GET", f.base+"/factgate/v1/requests/stream", nil)
	req2.Header.Set("Last-Event-ID", itoa(prev))
	resp2, err := c.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	sc := bufio.NewScanner(resp2.Body)
	got := ""
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			got = gjson.Get(line[6:], "trace_id").Str
			break
		}
	}
	if got != mine {
		t.Fatalf("the reconnect's backlog starts with %q, want %s", got, mine)
	}
}

// TestStreamEndsOnShutdown: an open live feed does not hold up a graceful
// shutdown.
func TestStreamEndsOnShutdown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	req, _ := http.NewRequest("GET", f.base+"/factgate/v1/requests/stream", nil)
	req.Header.Set("Authorization", "Bearer "+keyApp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := contextWithTimeout(20 * time.Second)
		defer cancel()
		done <- f.srv.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("an open live feed held the shutdown for 15s")
	}
}

func TestUIIsServedWithItsPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	status, h, b := f.do("GET", "/factgate/ui/", "", "")
	if status != 200 || !strings.Contains(string(b), `<main id="main"`) || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("the page: %d %s %s", status, h.Get("Content-Type"), abbreviate(b))
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP: %q", csp)
	}
	if status, h, _ := f.do("GET", "/factgate/ui/app.js", "", ""); status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/javascript") {
		t.Fatalf("app.js: %d %s", status, h.Get("Content-Type"))
	}
	if status, _, _ := f.do("GET", "/factgate/ui/nothing.js", "", ""); status != 404 {
		t.Fatalf("a missing file: %d", status)
	}
	_, h, _ = f.do("GET", "/factgate/ui/style.css", "", "")
	if status, _, _ := f.do("GET", "/factgate/ui/style.css", "", "", "If-None-Match", h.Get("ETag")); status != 304 {
		t.Fatalf("revalidation: %d", status)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
