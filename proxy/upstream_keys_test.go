package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestTheStartUpLogSaysWhoseKeyEachUpstreamSends: one line per upstream names
// where its calls' provider key comes from — the client's Authorization, its
// api_key_env or its pool — including the fallback that always sends its own.
func TestTheStartUpLogSaysWhoseKeyEachUpstreamSends(t *testing.T) {
	t.Setenv("FACTGATE_TEST_KEYLOG_MAIN", "sk-main")
	t.Setenv("FACTGATE_TEST_KEYLOG_P1", "sk-p1")
	t.Setenv("FACTGATE_TEST_KEYLOG_APP", "fg-app")
	upstreams := `upstreams:
  main: {base_url: 'http://127.0.0.1:9/v1', api_key_env: FACTGATE_TEST_KEYLOG_MAIN}
  backup: {base_url: 'http://127.0.0.1:9/v1', api_key_envs: [FACTGATE_TEST_KEYLOG_P1, FACTGATE_TEST_KEYLOG_P2]}
  bare: {base_url: 'http://127.0.0.1:9/v1'}
routes:
  - {name: r, models: [m], upstreams: [main, backup]}
  - {name: b, models: [b], upstream: bare}
  - {name: d, default: true, upstream: main}
`
	tests := []struct {
		name, auth string
		want       map[string][]string // upstream -> key_source, then phrases of detail
	}{
		{name: "passthrough", auth: "", want: map[string][]string{
			"main":   {"client", "the client's own Authorization header", "FACTGATE_TEST_KEYLOG_MAIN only for a request without one"},
			"backup": {"pool", "every call carries a key of the pool FACTGATE_TEST_KEYLOG_P1, FACTGATE_TEST_KEYLOG_P2 (1 of 2 set)"},
			"bare":   {"client", "a request without one goes without"},
		}},
		{name: "keys", auth: "auth: {mode: keys, keys: [{name: app, key_env: FACTGATE_TEST_KEYLOG_APP}]}\n", want: map[string][]string{
			"main":   {"env", "every call carries FACTGATE_TEST_KEYLOG_MAIN (auth.mode keys"},
			"backup": {"pool", "(2 of 2 set)"},
			"bare":   {"none", "calls carry no Authorization"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.auth != "" {
				t.Setenv("FACTGATE_TEST_KEYLOG_P2", "sk-p2") // auth mode keys needs every key
			}
			cfg, err := ParseConfig([]byte(tc.auth+upstreams), "keylog.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			if _, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))); err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]any{}
			for _, l := range strings.Split(logs.String(), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "upstream key" {
					got[rec["upstream"].(string)] = rec
				}
			}
			for up, want := range tc.want {
				rec := got[up]
				if rec == nil {
					t.Errorf("no start-up line for upstream %s:\n%s", up, logs.String())
					continue
				}
				if rec["key_source"] != want[0] {
					t.Errorf("upstream %s: key_source %v, want %s", up, rec["key_source"], want[0])
				}
				for _, phrase := range want[1:] {
					if d, _ := rec["detail"].(string); !strings.Contains(d, phrase) {
						t.Errorf("upstream %s: detail %q lacks %q", up, d, phrase)
					}
				}
			}
		})
	}
}
