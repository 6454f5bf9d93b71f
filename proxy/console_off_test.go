package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAConsoleThatIsOffSaysWhyAndHowToTurnItOn: on a config with the console off
// — passthrough, the README's RA3 configs, or console.enabled: false — the
// console's paths do not answer a bare 404: the page a browser opens says why it
// is off and which key turns it on, and the console's API answers the same in the
// OpenAI error envelope.
func TestAConsoleThatIsOffSaysWhyAndHowToTurnItOn(t *testing.T) {
	t.Setenv("FACTGATE_TEST_CONSOLE_OFF_KEY", "fg-console-off")
	keysOff := strings.Replace(baseConfig, "routes:", "auth: {mode: keys, keys: [{name: app, key_env: FACTGATE_TEST_CONSOLE_OFF_KEY}]}\nconsole: {enabled: false}\nroutes:", 1)
	tests := []struct {
		name, config string
		want         []string
	}{
		{name: "passthrough", config: baseConfig, want: []string{"auth.mode is passthrough", "console.enabled: true", "auth.mode: keys"}},
		{name: "turned off", config: keysOff, want: []string{"console.enabled is false", "test.yaml"}},
	}
	for _, tc := range tests {
		h := newHarness(t, "", tc.config)
		for _, c := range []struct {
			path, accept string
			html         bool
		}{
			{path: "/factgate/ui/", accept: "text/html,application/xhtml+xml,*/*;q=0.8", html: true},
			{path: "/factgate/ui/requests", accept: "text/html", html: true},
			{path: "/factgate/ui/", accept: ""},
			{path: "/factgate/v1/session", accept: "text/html"},
		} {
			req, err := http.NewRequest("GET", h.base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.accept != "" {
				req.Header.Set("Accept", c.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			where := tc.name + " " + c.path + " (Accept " + c.accept + ")"
			if resp.StatusCode != 404 {
				t.Errorf("%s: status %d, want 404", where, resp.StatusCode)
			}
			text := string(body)
			if c.html {
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(text, "<title>") {
					t.Errorf("%s: a browser got %s %q, want a page", where, resp.Header.Get("Content-Type"), text)
				}
			} else {
				var env struct {
					Error struct{ Message, Type, Code string }
				}
				if err := json.Unmarshal(body, &env); err != nil || env.Error.Code != "console_disabled" {
					t.Errorf("%s: got %s, want the error envelope with code console_disabled", where, text)
				}
				text = env.Error.Message
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s: the answer does not say %q:\n%s", where, w, text)
				}
			}
		}
	}
}
