package console_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/proxy"
)

const passthroughConfig = `
log: {level: info}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
knowledge:
  overlays:
    ra3: "%OVERLAY%"
routes:
  - name: ra3-analyst
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    inject: {}
    validate: {}
`

// TestPassthroughConsoleIsOffByDefault: with auth mode passthrough the proxy has
// no keys to log in with, so the console is off unless configured.
func TestPassthroughConsoleIsOffByDefault(t *testing.T) {
	t.Parallel()
	f := newFixture(t, passthroughConfig)
	for _, p := range []string{"/factgate/ui/", "/factgate/v1/requests", "/factgate/v1/session"} {
		if status, _, b := f.do("GET", p, "", ""); status != 404 {
			t.Errorf("%s: %d %s", p, status, b)
		}
	}
}

// TestPassthroughConsoleReadOnlyUnlessAdmin: console.enabled in passthrough is a
// read-only console for anyone who reaches it — every request and trace, unlike
// the trace API, which still gives a trace only to the credential that made its
// request; the proxy warns of it at start-up. The admin key of
// console.admin_key_env logs in to edit knowledge.
func TestPassthroughConsoleReadOnlyUnlessAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, passthroughConfig+"console: {enabled: true, admin_key_env: FACTGATE_TEST_CONSOLE_ADMIN, request_bytes: 0}\n")
	id := f.story("sk-provider-key-of-the-app", "分析这局录像。")
	waitFor(t, "the request in the list", func() bool {
		_, _, b := f.do("GET", "/factgate/v1/requests", "", "")
		return gjson.GetBytes(b, "requests.0.trace_id").Str == id
	})
	status, _, b := f.do("GET", "/factgate/v1/session", "", "")
	if status != 200 || !gjson.GetBytes(b, "anonymous").Bool() || gjson.GetBytes(b, "can_edit").Bool() || !gjson.GetBytes(b, "can_login").Bool() {
		t.Fatalf("anonymous session: %d %s", status, b)
	}
	// An app's provider key on an API call is not a console login.
	status, _, b = f.do("GET", "/factgate/v1/requests/"+id, "sk-provider-key-of-the-app", "")
	if status != 200 {
		t.Fatalf("the trace with a provider key: %d %s", status, b)
	}
	if gjson.GetBytes(b, "trace.request").Exists() {
		t.Fatal("request_bytes: 0 kept the request in the trace")
	}
	// Anonymous, without any credential: the console shows the trace.
	if status, _, b := f.do("GET", "/factgate/v1/requests/"+id, "", ""); status != 200 || gjson.GetBytes(b, "trace.id").Str != id {
		t.Fatalf("the trace on the anonymous console: %d %s", status, b)
	}
	// The trace API stays bound to the request's credential.
	for _, tc := range []struct {
		key    string
		status int
	}{{"", 401}, {"sk-someone-else", 404}, {"sk-provider-key-of-the-app", 200}} {
		if status, _, b := f.do("GET", "/factgate/v1/traces/"+id, tc.key, ""); status != tc.status {
			t.Errorf("GET /factgate/v1/traces/{id} with %q: %d %s, want %d", tc.key, status, b, tc.status)
		}
	}
	if !strings.Contains(f.logs.String(), "every request and trace") {
		t.Errorf("no start-up warning that the passthrough console shows every trace:\n%s", f.logs.String())
	}
	body := editBody("put", "", "", "house-rule", []string{"rule"}, "### 本站规则\n- 先写结论。", "", false)
	if status, _, b := f.do("POST", "/factgate/v1/knowledge/sets/ra3/entries", "", body, "X-Factgate-Console", "1"); status != 403 || gjson.GetBytes(b, "error.code").Str != "admin_required" {
		t.Fatalf("an anonymous edit: %d %s", status, b)
	}
	admin := f.browser("sk-test-console-passthrough-admin")
	status, r := edit(t, f, admin, body)
	if status != 200 || !r.Get("written").Bool() {
		t.Fatalf("the admin's edit: %d %s", status, r.Raw)
	}
	if !strings.Contains(f.logs.String(), `"who":"console-admin"`) {
		t.Fatal("the audit line does not name the passthrough admin")
	}
}

func TestConsoleConfigErrors(t *testing.T) {
	t.Parallel()
	base := `
upstreams: {mock: {base_url: "http://127.0.0.1:9/v1", api_key_env: FACTGATE_TEST_CONSOLE_UPSTREAM}}
routes: [{name: r, default: true, upstream: mock}]
`
	keys := "auth: {mode: keys, keys: [{name: a, key_env: FACTGATE_TEST_CONSOLE_APP}]}\n"
	for _, tc := range []struct{ config, want string }{
		{base + keys + "console: {admin_key_env: FACTGATE_TEST_CONSOLE_ADMIN}\n", "console.admin_key_env: only for auth.mode passthrough"},
		{base + "console: {admin_key_env: CONSOLE_ADMIN}\n", `console.admin_key_env: "CONSOLE_ADMIN" must name a FACTGATE_*`},
		{base + keys + "console: {session_ttl: 10s}\n", "console.session_ttl: 10s is shorter than a minute"},
		{base + keys + "console: {recent_requests: -1}\n", "console.recent_requests"},
		{base + keys + "console: {colour: red}\n", "c.yaml:5: console.colour: unknown key (known keys: enabled, session_ttl"},
	} {
		_, err := proxy.ParseConfig([]byte(tc.config), "c.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.config, err, tc.want)
		}
	}
	cfg, err := proxy.ParseConfig([]byte(base+keys), "c.yaml")
	if err != nil || !cfg.Console.On() {
		t.Fatalf("auth mode keys: console on by default: %v %v", err, cfg)
	}
	cfg, err = proxy.ParseConfig([]byte(base), "c.yaml")
	if err != nil || cfg.Console.On() {
		t.Fatalf("auth mode passthrough: console off by default: %v", err)
	}
	if _, err := proxy.New(mustParse(t, base+"console: {enabled: true, admin_key_env: FACTGATE_TEST_CONSOLE_UNSET}\n")); err == nil || !strings.Contains(err.Error(), "FACTGATE_TEST_CONSOLE_UNSET is not set") {
		t.Fatalf("a missing admin key: %v", err)
	}
}

func mustParse(t *testing.T, config string) *proxy.Config {
	t.Helper()
	cfg, err := proxy.ParseConfig([]byte(config), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
