package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// The console's tests run a real proxy (auth mode keys, a validating RA3 route
// with an experiment and an overlay) in front of the mock upstream, which
// answers the seed's story: a draft that calls 733 a bomber and 587 a confirmed
// MCV, revised into a hedged answer.

// The client keys of the fixture: ops is an admin, app and other are clients.
const (
	keyOps   = "sk-test-console-ops-0123456789"
	keyApp   = "sk-test-console-app-0123456789"
	keyOther = "sk-test-console-other-012345678"
)

func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"FACTGATE_TEST_CONSOLE_OPS":      keyOps,
		"FACTGATE_TEST_CONSOLE_APP":      keyApp,
		"FACTGATE_TEST_CONSOLE_OTHER":    keyOther,
		"FACTGATE_TEST_CONSOLE_UPSTREAM": "sk-upstream",
		"FACTGATE_TEST_CONSOLE_ADMIN":    "sk-test-console-passthrough-admin",
	} {
		os.Setenv(k, v)
	}
	os.Exit(m.Run())
}

const marker = "[机器可读声明]"

func claimsAnswer(prose string, units ...string) string {
	return prose + "\n\n" + marker + "\n```json\n{\n  \"unitClaims\": [" + strings.Join(units, ",") +
		"],\n  \"eventClaims\": [],\n  \"timelineClaims\": []\n}\n```\n"
}

const (
	claimBomber  = `{"unitId": 733, "player": "PlayerA", "claim": "AlliedBomberAircraft", "evidenceLevel": "highly likely", "evidence": ["select|6:02.00|733"], "alternatives": [], "needsConfirmation": []}`
	claimMCV     = `{"unitId": 587, "player": "PlayerA", "claim": "AlliedMCV", "evidenceLevel": "confirmed", "evidence": ["power|1:41.00|SpecialPower_UnpackReplaceSelf|587"], "alternatives": [], "needsConfirmation": []}`
	claimBase    = `{"unitId": 246, "player": "PlayerA", "claim": "AlliedConstructionYard", "evidenceLevel": "confirmed", "evidence": ["power|1:24.00|SpecialPower_PackReplaceSelf|246"], "alternatives": [], "needsConfirmation": []}`
	claimFighter = `{"unitId": 733, "player": "PlayerA", "claim": "AlliedFighterAircraft", "evidenceLevel": "possible", "evidence": ["select|6:02.00|733", "produce|5:30.00|AlliedFighterAircraft|655"], "alternatives": ["其他空中单位"], "needsConfirmation": ["733 之后是否参与对空作战"]}`
	claimMaybe   = `{"unitId": 587, "player": "PlayerA", "claim": "AlliedMCV", "evidenceLevel": "possible", "evidence": ["power|1:41.00|SpecialPower_UnpackReplaceSelf|587"], "alternatives": ["AlliedMiner"], "needsConfirmation": ["587 之后是否作为建造者出现"]}`

	draftProse = "## 对局概览\nPlayerA（盟军）在 6:02 出动世纪轰炸机 733 空袭苏联基地；587 在 1:41 展开，确认是盟军基地车。"
	fixedProse = "## 对局概览\nPlayerA（盟军）在 5:30 生产了第一架战斗机，6:02 选中的 733 可能就是它；587 在 1:41 展开，可能是基地车，也可能是矿车展开的指挥中心。"
)

var replay = func() string {
	b, err := os.ReadFile("testdata/allied_vs_soviet.txt")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// script: revision requests (with an assistant turn) get the fixed answer, a
// request asking for a short summary gets it too (no revision), the rest the
// contradicting draft — as does every call of a request that says 坚持原稿
// (its revisions repeat the draft, which is then returned downgraded).
func script() string {
	answer := func(content string, tokens int) map[string]any {
		return map[string]any{"content": content, "usage": map[string]int{"prompt_tokens": tokens, "completion_tokens": tokens / 4}}
	}
	fixed := claimsAnswer(fixedProse, claimFighter, claimMaybe, claimBase)
	b, _ := json.Marshal(map[string]any{
		"default": answer(claimsAnswer(draftProse, claimBomber, claimMCV, claimBase), 2400),
		"rules": []any{
			map[string]any{"name": "stubborn", "match": map[string]any{"any_message": "坚持原稿"}, "answer": answer(claimsAnswer(draftProse, claimBomber, claimMCV, claimBase), 2400)},
			map[string]any{"name": "revision", "match": map[string]any{"has_assistant": true}, "answer": answer(fixed, 2600)},
			map[string]any{"name": "short", "match": map[string]any{"last_user": "^请简要"}, "answer": answer(fixed, 2000)},
		},
	})
	return string(b)
}

const fixtureConfig = `
server:
  keepalive_interval: 150ms
log: {level: info}
auth:
  mode: keys
  keys:
    - {name: ops, key_env: FACTGATE_TEST_CONSOLE_OPS, admin: true}
    - {name: app, key_env: FACTGATE_TEST_CONSOLE_APP}
    - {name: other, key_env: FACTGATE_TEST_CONSOLE_OTHER}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s, api_key_env: FACTGATE_TEST_CONSOLE_UPSTREAM}
knowledge:
  overlays:
    ra3: "%OVERLAY%"
routes:
  - name: ra3-analyst
    models: [ra3-analyst]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    inject: {additional_rules: "- 用中文回答。"}
    validate: {strip_claims: never}
    experiment:
      name: ra3-strict-rules
      allow_forcing: true
      control: baseline
      variants:
        - {name: baseline, weight: 50}
        - {name: strict, weight: 50, additional_rules: "- 只引用录像中真实出现过的操作。"}
  - name: plain
    models: [plain]
    upstream: mock
`

type fixture struct {
	t       *testing.T
	mock    *mockupstream.Server
	srv     *proxy.Server
	base    string
	overlay string
	logs    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFixture starts the mock upstream and the proxy with opts; config "" is
// fixtureConfig (%MOCK% and %OVERLAY% are replaced).
func newFixture(t *testing.T, config string, opts ...proxy.Option) *fixture {
	t.Helper()
	sc, err := mockupstream.ParseScript([]byte(script()), "console")
	if err != nil {
		t.Fatal(err)
	}
	mock := mockupstream.New(mockupstream.Options{Script: sc, Record: true})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	if config == "" {
		config = fixtureConfig
	}
	overlay := filepath.Join(t.TempDir(), "ra3.overlay.json")
	cfg, err := proxy.ParseConfig([]byte(strings.NewReplacer("%MOCK%", mock.URL(), "%OVERLAY%", overlay).Replace(config)), "console-test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &syncBuffer{}
	srv, err := proxy.New(cfg, append([]proxy.Option{proxy.WithLogger(slog.New(slog.NewJSONHandler(logs, nil)))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &fixture{t: t, mock: mock, srv: srv, base: "http://" + ln.Addr().String(), overlay: overlay, logs: logs}
}

// storyBody is the seed's request: a system prompt and the replay.
func storyBody(question string) string {
	b, _ := json.Marshal(map[string]any{
		"model": "ra3-analyst",
		"messages": []map[string]string{
			{"role": "system", "content": "你是红警 3 录像分析助手。"},
			{"role": "user", "content": question + "\n\n" + replay},
		},
	})
	return string(b)
}

// do sends a request with a Bearer key ("" for none) and headers in pairs.
func (f *fixture) do(method, path, key, body string, header ...string) (int, http.Header, []byte) {
	f.t.Helper()
	return doWith(f.t, http.DefaultClient, method, f.base+path, key, body, header...)
}

func doWith(t *testing.T, c *http.Client, method, url, key, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// story sends the story as key's client (with headers in pairs) and returns the
// trace id; the answer must be 200.
func (f *fixture) story(key, question string, header ...string) string {
	f.t.Helper()
	status, h, b := f.do("POST", "/v1/chat/completions", key, storyBody(question), header...)
	if status != 200 {
		f.t.Fatalf("story request: %d %s", status, b)
	}
	id := h.Get("X-Factgate-Trace-Id")
	if id == "" {
		f.t.Fatal("no X-Factgate-Trace-Id")
	}
	return id
}

// browser returns an HTTP client with a cookie jar, logged in with key.
func (f *fixture) browser(key string) *http.Client {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	status, _, b := doWith(f.t, c, "POST", f.base+"/factgate/v1/session", "", fmt.Sprintf(`{"key": %q}`, key), "X-Factgate-Console", "1")
	if status != 200 {
		f.t.Fatalf("login: %d %s", status, b)
	}
	return c
}

// waitFor polls cond every 20ms until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastSystemPrompt is the system prompt of the last chat completion the mock saw.
func (f *fixture) lastSystemPrompt() string {
	f.t.Helper()
	recs := f.mock.Requests()
	for i := len(recs) - 1; i >= 0; i-- {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(recs[i].Body, &body) == nil && len(body.Messages) > 0 && body.Messages[0].Role == "system" {
			return body.Messages[0].Content
		}
	}
	f.t.Fatal("the mock saw no request with a system prompt")
	return ""
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
