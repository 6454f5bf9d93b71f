package console_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestFailedLoginsAreThrottled: after console.login_throttle's failed logins
// in a minute from one address — or with keys sharing a prefix, from anywhere —
// logins get 429 in the OpenAI envelope with Retry-After, a correct key too;
// the WARN line is rate-limited, not one per attempt.
func TestFailedLoginsAreThrottled(t *testing.T) {
	t.Parallel()
	attempt := func(f *fixture, key string) (int, string, []byte) {
		status, h, b := f.do("POST", "/factgate/v1/session", "", fmt.Sprintf(`{"key": %q}`, key), "X-Factgate-Console", "1")
		return status, h.Get("Retry-After"), b
	}
	t.Run("per address", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureConfig+"console: {login_throttle: {per_address: 3, per_key_prefix: 1000}}\n")
		for i := range 3 {
			if status, _, b := attempt(f, fmt.Sprintf("guess-%d-xxxxxxxx", i)); status != 401 {
				t.Fatalf("failed login %d: %d %s", i+1, status, b)
			}
		}
		for i := range 50 {
			status, retry, b := attempt(f, fmt.Sprintf("another-guess-%d", i))
			if status != 429 || gjson.GetBytes(b, "error.code").Str != "login_throttled" || retry == "" {
				t.Fatalf("attempt %d past the bound: %d %s (Retry-After %q), want 429 login_throttled", i+4, status, b, retry)
			}
		}
		if status, _, b := attempt(f, keyApp); status != 429 {
			t.Fatalf("a correct key from the throttled address: %d %s, want 429", status, b)
		}
		if n := strings.Count(f.logs.String(), `"msg":"console login failed"`); n < 1 || n > 2 {
			t.Fatalf("%d WARN lines for 54 refused logins, want one or two (rate-limited):\n%s", n, grepLogs(f, "console login"))
		}
		// Bearer keys are not logins: the API still answers the right key.
		if status, _, b := f.do("GET", "/factgate/v1/requests", keyApp, ""); status != 200 {
			t.Fatalf("the API with a Bearer key: %d %s", status, b)
		}
	})
	t.Run("per key prefix", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureConfig+"console: {login_throttle: {per_address: 1000, per_key_prefix: 3}}\n")
		for i := range 3 {
			if status, _, b := attempt(f, fmt.Sprintf("sk-test-guess-%d", i)); status != 401 {
				t.Fatalf("failed login %d: %d %s", i+1, status, b)
			}
		}
		if status, _, b := attempt(f, keyApp); status != 429 { // also starts with sk-test-
			t.Fatalf("a key with the guessed prefix: %d %s, want 429", status, b)
		}
		if status, _, b := attempt(f, "zz-other-prefix"); status != 401 {
			t.Fatalf("a key with another prefix: %d %s, want 401 (not throttled)", status, b)
		}
	})
}

func grepLogs(f *fixture, substr string) string {
	var out []string
	for line := range strings.Lines(f.logs.String()) {
		if strings.Contains(line, substr) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

// mcvTags are the Allied MCV entry's tags in the ra3 set.
var mcvTags = []string{"vehicle", "builder", "unpack", "amphibious", "specialPower:SpecialPower_UnpackReplaceSelf"}

// TestAKnowledgeEditIsBoundedAndNamesUnknownFields: an entry over
// console.max_entry_bytes is refused (413, nothing written), as is an edit with
// fields the API does not know — each named — rather than dropping them.
func TestAKnowledgeEditIsBoundedAndNamesUnknownFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ops := f.browser(keyOps)
	status, res := edit(t, f, ops, editBody("put", "factions", "盟军", "AlliedMCV", mcvTags, strings.Repeat("基地车。", 400000), "", false))
	if status != 413 || res.Get("error.code").Str != "entry_too_large" || !strings.Contains(res.Get("error.message").Str, "console.max_entry_bytes") {
		t.Fatalf("a 4.8 MB entry: %d %s, want 413 entry_too_large naming console.max_entry_bytes", status, res.Raw)
	}
	b, _ := json.Marshal(map[string]any{
		"action": "put", "colour": "red",
		"scope": map[string]string{"dimension": "factions", "value": "盟军", "region": "eu"},
		"entry": map[string]any{"id": "AlliedMCV", "tags": []string{"unit"}, "text": "x", "txt": "typo", "asset": "combat_policy"},
	})
	status, res = edit(t, f, ops, string(b))
	msg := res.Get("error.message").Str
	if status != 400 || res.Get("error.code").Str != "unknown_parameter" {
		t.Fatalf("unknown fields: %d %s, want 400 unknown_parameter", status, res.Raw)
	}
	for _, name := range []string{"colour", "scope.region", "entry.txt", "entry.asset"} {
		if !strings.Contains(msg, name) {
			t.Errorf("the refusal does not name %s: %s", name, msg)
		}
	}
	status, _, body := doWith(t, ops, "GET", f.base+"/factgate/v1/knowledge/sets/ra3", "", "")
	if status != 200 || gjson.GetBytes(body, "overlay.etag").Str != "absent" {
		t.Fatalf("the refused edits wrote the overlay: %d %s", status, gjson.GetBytes(body, "overlay").Raw)
	}
}

// TestConsoleCallsAreInTheAccessLog: logins, request lists, trace reads and
// knowledge edits leave an access log line naming who made them and the status
// — a read with a session that was then ended would have been seen.
func TestConsoleCallsAreInTheAccessLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	cookie := f.login(keyOps)
	id := f.story(keyApp, "请简要分析这局录像。")
	f.withCookie("GET", "/factgate/v1/requests", cookie, "")
	f.withCookie("GET", "/factgate/v1/requests/"+id, cookie, "")
	f.withCookie("GET", "/factgate/v1/traces/"+id, cookie, "")
	f.withCookie("POST", "/factgate/v1/knowledge/sets/ra3/entries", cookie, editBody("put", "factions", "盟军", "AlliedMCV", mcvTags, "盟军基地车。", "", true))
	f.withCookie("DELETE", "/factgate/v1/session", cookie, "")
	f.withCookie("GET", "/factgate/v1/requests", cookie, "")
	want := []struct {
		method, path, client string
		status               int
	}{
		{"POST", "/factgate/v1/session", "ops", 200},
		{"GET", "/factgate/v1/requests", "ops", 200},
		{"GET", "/factgate/v1/requests/" + id, "ops", 200},
		{"GET", "/factgate/v1/traces/" + id, "ops", 200},
		{"POST", "/factgate/v1/knowledge/sets/ra3/entries", "ops", 200},
		{"DELETE", "/factgate/v1/session", "ops", 204},
		{"GET", "/factgate/v1/requests", "", 401},
	}
	for _, w := range want {
		found := false
		for line := range strings.Lines(f.logs.String()) {
			l := gjson.Parse(line)
			if l.Get("msg").Str == "request" && l.Get("method").Str == w.method && l.Get("path").Str == w.path &&
				l.Get("client").Str == w.client && int(l.Get("status").Int()) == w.status && l.Get("remote").Str != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("no access log line for %s %s by %q with status %d:\n%s", w.method, w.path, w.client, w.status, grepLogs(f, `"msg":"request"`))
		}
	}
}
