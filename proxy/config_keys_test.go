package proxy

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAWrongKeyIsNamedByItsYAMLPath: a mistake in the shipped config is named the
// way its author sees it — the file and line, the YAML path of the key and the
// key that was meant — never by the Go type the key would have filled
// ("field listn not found in type proxy.ServerConfig").
func TestAWrongKeyIsNamedByItsYAMLPath(t *testing.T) {
	t.Parallel()
	shipped, err := os.ReadFile("../configs/factgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to string
		want           string
	}{
		{"a server key", "  listen: 127.0.0.1:8080", "  listn: 127.0.0.1:8080", "server.listn: unknown key (did you mean listen?)"},
		{"a log key", "  access: true", "  access_log: true", "log.access_log: unknown key (did you mean access?)"},
		{"an upstream key", "    connect_timeout: 5s", "    conect_timeout: 5s", "upstreams.main.conect_timeout: unknown key (did you mean connect_timeout?)"},
		{"a retry key", "      max_retries: 2", "      max_retry: 2", "upstreams.main.retry.max_retry: unknown key (did you mean max_retries?)"},
		{"a cache key", "    max_entries: 100000", "    max_entrys: 100000", "cache.memory.max_entrys: unknown key (did you mean max_entries?)"},
		{"a console key", "  session_ttl: 12h", "  sesion_ttl: 12h", "console.sesion_ttl: unknown key (did you mean session_ttl?)"},
		{"a route key", "    upstream_model: deepseek-chat", "    upstream_modle: deepseek-chat", "routes[0] (ra3-analyst).upstream_modle: unknown key (did you mean upstream_model?)"},
		{"a stage block's key", "      threshold: Contradiction", "      treshold: Contradiction", "routes[0] (ra3-analyst).revise.treshold: unknown key (did you mean threshold?)"},
		{"a stage block's nested key", "      max_session_segments: 32", "      max_session_segment: 32", "routes[0] (ra3-analyst).facts.max_session_segment: unknown key (did you mean max_session_segments?)"},
		{"a value of the wrong type", "  max_json_depth: 128", "  max_json_depth: deep", "server.max_json_depth: want a whole number, got `deep`"},
		{"a bad duration", "  read_timeout: 60s", "  read_timeout: 60", `server.read_timeout: bad duration "60"`},
		{"a bad value in a stage block", "      max_revisions: 2", "      max_revisions: two", "routes[0] (ra3-analyst).revise.max_revisions: want a whole number, got `two`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := string(shipped)
			if n := strings.Count(text, "\n"+tc.from); n != 1 {
				t.Fatalf("configs/factgate.yaml has a line starting %q %d times, want once", tc.from, n)
			}
			at := strings.Index(text, "\n"+tc.from) + 1
			text = text[:at] + tc.to + text[at+len(tc.from):]
			line := strings.Count(text[:at], "\n") + 1
			path := filepath.Join(t.TempDir(), "factgate.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := CheckConfig(path)
			if err == nil {
				t.Fatal("config check passed")
			}
			want := path + ":" + strconv.Itoa(line) + ": " + tc.want
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error says\n  %s\nwant it to say\n  %s", err, want)
			}
			if m := goTypeName.FindString(err.Error()); m != "" || strings.Contains(err.Error(), "not found in type") || strings.Contains(err.Error(), "unmarshal") {
				t.Errorf("the error names a Go type (%q): %s", m, err)
			}
			if strings.Count(err.Error(), path) != 1 {
				t.Errorf("the error names the file %d times, want once: %s", strings.Count(err.Error(), path), err)
			}
		})
	}
}

// goTypeName matches a qualified Go type name such as proxy.ServerConfig or
// revise.Config (a YAML path's parts are lower case).
var goTypeName = regexp.MustCompile(`\b[a-z]+\.[A-Z]\w*`)
