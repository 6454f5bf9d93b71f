package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// validationConfig has one validating RA3 route; %MOCK% is the mock's URL and
// %BODY% the server's max_request_body, which bounds checks too.
const validationConfig = `
server:
  max_request_body: %BODY%
  max_check_body: %BODY%
upstreams:
  mock:
    base_url: "%MOCK%"
    read_timeout: 5s
routes:
  - name: analyst
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    validate: {}
`

func validationHarness(t *testing.T, script, maxBody string) *harness {
	t.Helper()
	return newHarness(t, script, strings.ReplaceAll(validationConfig, "%BODY%", maxBody))
}

// validationFixture reads a file of testdata/check (copies of the RA3 fixtures).
func validationFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "check", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkBody(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckAPIReturnsTheIssues(t *testing.T) {
	t.Parallel()
	h := validationHarness(t, "", "64MiB")
	replay := validationFixture(t, "allied_vs_soviet.txt")
	answer := validationFixture(t, "c03_answer.txt")
	status, hdr, body := h.post(t, "/factgate/v1/check", checkBody(t, map[string]any{"facts": replay, "answer": answer}))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var doc map[string][]map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || len(doc) != 1 || len(doc["issues"]) != 1 {
		t.Fatalf("want exactly {\"issues\":[one]}: %s", body)
	}
	is := doc["issues"][0]
	var fields []string
	for k := range is {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{"code", "message", "path", "recommendation", "severity"}) {
		t.Fatalf("issue fields %v", fields)
	}
	if string(is["code"]) != `"power.not_used"` || string(is["severity"]) != `"Contradiction"` || string(is["path"]) != `"unitClaims[0].evidence[0]"` {
		t.Fatalf("issue %s", body)
	}
	if gjson.GetBytes(is["recommendation"], "evidenceLevel").Str != "uncertain" || !strings.Contains(gjson.GetBytes(is["message"], "@this").Str, "301") {
		t.Fatalf("issue %s", body)
	}
	if hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Factgate-Issues") != "C1" {
		t.Fatalf("headers %v", hdr)
	}
}

func TestCheckAPISessionSegmentsAndOptions(t *testing.T) {
	t.Parallel()
	h := validationHarness(t, "", "64MiB")
	replay := validationFixture(t, "allied_vs_soviet.txt")
	// Split the log in two segments: the answer's citations span both.
	lines := strings.SplitAfter(replay, "\n")
	seg1, seg2 := strings.Join(lines[:200], ""), strings.Join(append(lines[:4:4], lines[200:]...), "")
	answer := validationFixture(t, "c03_answer.txt")
	for _, tc := range []struct {
		name   string
		fields map[string]any
		want   string
	}{
		{"two segments", map[string]any{"facts": []string{seg1, seg2}, "answer": answer}, `["power.not_used"]`},
		{"a missing block is Fatal by default", map[string]any{"facts": replay, "answer": "没有声明。"}, `["claims.missing"]`},
		{"require_claims false makes it a Warning", map[string]any{"facts": replay, "answer": "没有声明。", "require_claims": false}, `["claims.missing"]`},
		{"garbage facts: only the format rules", map[string]any{"facts": "\x00\x01\xff garbage \x7f{{{", "answer": answer}, `[]`},
		{"knowledge set and scopes from the request", map[string]any{"facts": replay, "answer": answer, "knowledge_set": "ra3-corona", "scopes": map[string]any{"factions": "苏联,盟军"}}, `["asset.unknown","power.not_used"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, _, body := h.post(t, "/factgate/v1/check", checkBody(t, tc.fields))
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := gjson.GetBytes(body, "issues.#.code").Raw; got != tc.want {
				t.Fatalf("codes %s, want %s: %s", got, tc.want, body)
			}
		})
	}
	_, _, body := h.post(t, "/factgate/v1/check", checkBody(t, map[string]any{"facts": replay, "answer": "没有声明。", "require_claims": false}))
	if sev := gjson.GetBytes(body, "issues.0.severity").Str; sev != "Warning" {
		t.Fatalf("require_claims false: severity %s", sev)
	}
}

func TestCheckAPIBadInput(t *testing.T) {
	t.Parallel()
	h := validationHarness(t, "", "64MiB")
	answer := validationFixture(t, "c03_answer.txt")
	line := "0:05.20 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\n"
	huge := strings.Repeat(line, 50<<20/len(line)+1)
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   string
		param  string
		says   string
	}{
		{"malformed JSON", `{"facts": "x", "answer": }`, 400, "invalid_json", "", "line 1"},
		{"not an object", `["facts"]`, 400, "invalid_request", "", "JSON object"},
		{"missing answer", `{"facts": "x"}`, 400, "missing_answer", "answer", "no answer"},
		{"answer not a string", `{"facts": "x", "answer": 3}`, 400, "invalid_answer", "answer", "string"},
		{"missing facts", `{"answer": "x"}`, 400, "missing_facts", "facts", "no facts"},
		{"facts of the wrong type", `{"facts": {"a": 1}, "answer": "x"}`, 400, "invalid_facts", "facts", "array of strings"},
		{"a segment that is not a string", `{"facts": ["a", 2], "answer": "x"}`, 400, "invalid_facts", "facts", "facts[1]"},
		{"scopes of the wrong type", `{"facts": "x", "answer": "x", "scopes": {"factions": 1}}`, 400, "invalid_scopes", "scopes", "scopes.factions"},
		{"an unknown knowledge set", `{"facts": "x", "answer": "x", "knowledge_set": "ra4"}`, 400, "unknown_knowledge_set", "", `"ra4"`},
		{"50 MB of facts (under the body limit)", checkBody(t, map[string]any{"facts": huge, "answer": answer}), 413, "facts_too_large", "", "16 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, _, body := h.post(t, "/factgate/v1/check", tc.body)
			e := gjson.GetBytes(body, "error")
			if status != tc.status || e.Get("code").Str != tc.code || e.Get("param").Str != tc.param ||
				e.Get("type").Str != "invalid_request_error" || !strings.Contains(e.Get("message").Str, tc.says) {
				t.Fatalf("got %d %s, want %d %s (param %q) mentioning %q", status, body, tc.status, tc.code, tc.param, tc.says)
			}
		})
	}
	resp, err := http.Get(h.base + "/factgate/v1/check")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || gjson.GetBytes(b, "error.code").Str != "method_not_allowed" {
		t.Fatalf("GET: %d %s", resp.StatusCode, b)
	}
}

// TestCheckAPIBodyOverTheServerLimit: with the default 16MiB body limit, a 50 MB
// check request is refused from its Content-Length, before its body is read, with
// the limit named. (The test sends only the start of the body: a client still
// writing when the server closes would see a reset instead of the answer.)
func TestCheckAPIBodyOverTheServerLimit(t *testing.T) {
	t.Parallel()
	h := validationHarness(t, "", "16MiB")
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	start := `{"answer":"x","facts":"` + strings.Repeat(`0:05.20 PlayerA 出售 [UnitId]246\n`, 100)
	if _, err := fmt.Fprintf(conn, "POST /factgate/v1/check HTTP/1.1\r\nHost: factgate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", 50<<20, start); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || gjson.GetBytes(b, "error.code").Str != "request_too_large" ||
		!strings.Contains(gjson.GetBytes(b, "error.message").Str, "server.max_request_body") {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
}

// TestValidationThroughTheProxy: a route with pack ra3 and validate; the upstream
// answers with fixture case c03's answer. The response says how many issues the
// draft had, the trace lists them, and the metric counts them.
func TestValidationThroughTheProxy(t *testing.T) {
	t.Parallel()
	replay := validationFixture(t, "allied_vs_soviet.txt")
	answer := validationFixture(t, "c03_answer.txt")
	content, _ := json.Marshal(answer)
	h := validationHarness(t, "default: {content: "+string(content)+"}", "16MiB")
	status, hdr, body := h.post(t, "/v1/chat/completions", checkBody(t, map[string]any{
		"model":    "ra3-analyst",
		"messages": []map[string]string{{"role": "user", "content": "请分析这局录像。\n" + replay}},
	}))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if got := hdr.Get("X-Factgate-Issues"); !strings.HasPrefix(got, "draft=C1;final=") {
		t.Fatalf("X-Factgate-Issues %q, want the draft's counts C1 (case c03)", got)
	}
	id := hdr.Get("X-Factgate-Trace-Id")
	if id == "" {
		t.Fatal("no trace id")
	}
	tr := h.trace(t, id)
	draft := tr.Get("attempts.0")
	if draft.Get("kind").Str != "draft" || draft.Get("counts").Str != "C1" ||
		draft.Get("issues.0.code").Str != "power.not_used" || draft.Get("issues.0.path").Str != "unitClaims[0].evidence[0]" {
		t.Fatalf("trace draft attempt: %s", draft.Raw)
	}
	if !tr.Get("timings.validate").Exists() || tr.Get("fact_key").Str == "" || tr.Get("knowledge_set").Str != "ra3" {
		t.Fatalf("trace: %s", tr.Raw)
	}
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `factgate_validation_issues_total{code="power.not_used",route="analyst",severity="Contradiction",variant=""} 1`
	if !strings.Contains(string(m), want) {
		t.Fatalf("metrics lack %s", want)
	}
}
