package console_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func editBody(action, dim, value, id string, tags []string, text, etag string, dryRun bool) string {
	b, _ := json.Marshal(map[string]any{
		"action": action, "dry_run": dryRun, "etag": etag,
		"scope": map[string]string{"dimension": dim, "value": value},
		"entry": map[string]any{"id": id, "tags": tags, "text": text},
	})
	return string(b)
}

// edit posts an edit with the admin's session cookie.
func edit(t *testing.T, f *fixture, c *http.Client, body string) (int, gjson.Result) {
	t.Helper()
	status, _, b := doWith(t, c, "POST", f.base+"/factgate/v1/knowledge/sets/ra3/entries", "", body, "X-Factgate-Console", "1")
	return status, gjson.ParseBytes(b)
}

// TestKnowledgeEditReachesTheNextRequest: an admin edits the Allied MCV entry
// from the console: the preview lints and diffs against the built-in entry
// without writing; saving writes the overlay file, logs an audit line, and the
// very next request's injected system prompt carries the new text — as the
// render endpoint shows it. Disable and revert work the same way.
func TestKnowledgeEditReachesTheNextRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ops := f.browser(keyOps)

	status, _, b := doWith(t, ops, "GET", f.base+"/factgate/v1/knowledge/sets/ra3", "", "")
	if status != 200 {
		t.Fatalf("set: %d %s", status, b)
	}
	set := gjson.ParseBytes(b)
	etag := set.Get("overlay.etag").Str
	var builtin gjson.Result
	for _, sc := range set.Get("scopes").Array() {
		if sc.Get("dimension").Str == "factions" && sc.Get("value").Str == "盟军" {
			for _, e := range sc.Get("entries").Array() {
				if e.Get("id").Str == "AlliedMCV" {
					builtin = e
				}
			}
		}
	}
	if builtin.Get("origin").Str != "builtin" || etag != "absent" || set.Get("overlay.path").Str != f.overlay {
		t.Fatalf("before any edit: entry %s, overlay %s", builtin.Raw, set.Get("overlay").Raw)
	}
	var tags []string
	for _, tg := range builtin.Get("tags").Array() {
		tags = append(tags, tg.Str)
	}
	const fact = "专家修订：展开前必须先移动到开阔地。"
	newText := builtin.Get("text").Str + "- " + fact + "\n"

	// Preview: the diff against the built-in entry, nothing written.
	status, r := edit(t, f, ops, editBody("put", "factions", "盟军", "AlliedMCV", tags, newText, etag, true))
	if status != 200 || r.Get("written").Bool() {
		t.Fatalf("preview: %d %s", status, r.Raw)
	}
	if ops := r.Get("text_diff").Array(); len(ops) < 2 || ops[len(ops)-1].Get("op").Str != "ins" || !strings.Contains(ops[len(ops)-1].Get("text").Str, fact) {
		t.Fatalf("preview diff: %s", r.Get("text_diff").Raw)
	}
	if _, err := os.Stat(f.overlay); !os.IsNotExist(err) {
		t.Fatal("the preview wrote the overlay")
	}

	// A client key may not edit.
	app := f.browser(keyApp)
	if status, _, b := doWith(t, app, "POST", f.base+"/factgate/v1/knowledge/sets/ra3/entries", "", editBody("put", "factions", "盟军", "AlliedMCV", tags, newText, "", false), "X-Factgate-Console", "1"); status != 403 {
		t.Fatalf("a client key editing: %d %s", status, b)
	}
	// The cookie alone, without the console header, may not either.
	if status, _, _ := doWith(t, ops, "POST", f.base+"/factgate/v1/knowledge/sets/ra3/entries", "", editBody("put", "factions", "盟军", "AlliedMCV", tags, newText, "", false)); status != 403 {
		t.Fatalf("an edit without the console header: %d", status)
	}

	// Save.
	status, r = edit(t, f, ops, editBody("put", "factions", "盟军", "AlliedMCV", tags, newText, etag, false))
	if status != 200 || !r.Get("written").Bool() || r.Get("overlay.version").Int() < 2 || r.Get("after.text").Str != newText {
		t.Fatalf("save: %d %s", status, r.Raw)
	}
	file := readFile(t, f.overlay)
	if !strings.Contains(file, fact) || !strings.Contains(file, `"盟军"`) {
		t.Fatalf("the overlay file: %s", file)
	}
	audit := ""
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(line, "knowledge overlay edited") {
			audit = line
		}
	}
	for _, want := range []string{`"who":"ops"`, `"set":"ra3"`, `"scope":"factions/盟军"`, `"entry":"AlliedMCV"`, `"action":"put"`} {
		if !strings.Contains(audit, want) {
			t.Fatalf("the audit line lacks %s: %q", want, audit)
		}
	}

	// The next request carries it, exactly as the render endpoint shows it.
	f.story(keyApp, "分析这局录像。", "X-Factgate-Variant", "baseline")
	prompt := f.lastSystemPrompt()
	if !strings.Contains(prompt, fact) {
		t.Fatal("the next request's injected prompt does not carry the edit")
	}
	status, _, b = doWith(t, ops, "GET", f.base+"/factgate/v1/knowledge/render?route=ra3-analyst&set=ra3&scope.factions=%E7%9B%9F%E5%86%9B,%E8%8B%8F%E8%81%94&scope.maps=map_mp_2_rao1", "", "")
	rendered := gjson.GetBytes(b, "prompt").Str
	if status != 200 || !gjson.GetBytes(b, "injected").Bool() || rendered == "" || !strings.HasPrefix(prompt, rendered) {
		t.Fatalf("render (%d) is not what was injected:\nrendered: %.200q\ninjected: %.200q", status, rendered, prompt)
	}
	if rest := prompt[len(rendered):]; !strings.HasPrefix(rest, "\n\n## 应用的补充要求") {
		t.Fatalf("after the rendered prompt the upstream saw %.80q, want only the merged client message", rest)
	}

	// A stale etag: another edit happened meanwhile.
	if status, r := edit(t, f, ops, editBody("put", "factions", "盟军", "AlliedMCV", tags, "x", etag, false)); status != 409 || r.Get("error.code").Str != "overlay_changed" {
		t.Fatalf("a stale etag: %d %s", status, r.Raw)
	}

	// Disable removes it from the prompt; revert brings back the built-in entry.
	status, r = edit(t, f, ops, editBody("disable", "factions", "盟军", "AlliedMCV", nil, "", "", false))
	if status != 200 || r.Get("after").Exists() && r.Get("after").Type != gjson.Null {
		t.Fatalf("disable: %d %s", status, r.Raw)
	}
	f.story(keyApp, "分析这局录像。", "X-Factgate-Variant", "baseline")
	if p := f.lastSystemPrompt(); strings.Contains(p, "AlliedMCV：") || strings.Contains(p, fact) {
		t.Fatal("the disabled entry is still injected")
	}
	status, r = edit(t, f, ops, editBody("revert", "factions", "盟军", "AlliedMCV", nil, "", "", false))
	if status != 200 || r.Get("after.text").Str != builtin.Get("text").Str {
		t.Fatalf("revert: %d %s", status, r.Raw)
	}
	f.story(keyApp, "分析这局录像。", "X-Factgate-Variant", "baseline")
	if p := f.lastSystemPrompt(); strings.Contains(p, fact) || !strings.Contains(p, builtin.Get("text").Str) {
		t.Fatal("after revert the built-in entry is not back")
	}
}

// TestKnowledgeEditLint: an edit that would make the set invalid is refused
// with every problem named, and nothing is written.
func TestKnowledgeEditLint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ops := f.browser(keyOps)
	for _, tc := range []struct {
		name, body, problem string
	}{
		{"unknown tag", editBody("put", "factions", "盟军", "AlliedMCV", []string{"vehicle", "amphibous"}, "### x", "", false), `unknown tag \"amphibous\"`},
		{"empty text", editBody("put", "factions", "盟军", "AlliedMCV", []string{"vehicle"}, "  \n", "", false), "empty text"},
		{"empty id", editBody("put", "", "", "", []string{"rule"}, "### x", "", false), "empty id"},
	} {
		status, r := edit(t, f, ops, tc.body)
		if status != 422 || r.Get("error.code").Str != "knowledge_invalid" || !strings.Contains(r.Get("problems").Raw, tc.problem) {
			t.Errorf("%s: %d %s", tc.name, status, r.Raw)
		}
	}
	if _, err := os.Stat(f.overlay); !os.IsNotExist(err) {
		t.Fatal("a refused edit wrote the overlay")
	}

	// A hand-broken overlay on disk is named, not overwritten.
	if err := os.WriteFile(f.overlay, []byte(`{"global": {"entries": [{"id": "x", "tags": ["nope"], "text": "y"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	status, r := edit(t, f, ops, editBody("put", "", "", "extra-rule", []string{"rule"}, "### 新规则", "", false))
	if status != 409 || r.Get("error.code").Str != "overlay_invalid" || !strings.Contains(r.Get("problems").Raw, `unknown tag \"nope\"`) {
		t.Fatalf("a broken overlay on disk: %d %s", status, r.Raw)
	}

	// A set without an overlay cannot be edited.
	status, _, b := doWith(t, ops, "POST", f.base+"/factgate/v1/knowledge/sets/ra3-corona/entries", "", editBody("put", "", "", "x", nil, "y", "", false), "X-Factgate-Console", "1")
	if status != 409 || gjson.GetBytes(b, "error.code").Str != "no_overlay" || !strings.Contains(string(b), "knowledge.overlays.ra3-corona") {
		t.Fatalf("a set without an overlay: %d %s", status, b)
	}
}

// TestKnowledgeBrowse: the overview lists the sets with their dimensions and
// overlay state, and the routes that inject; render without a route is the
// knowledge alone and names unknown scope values.
func TestKnowledgeBrowse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	status, _, b := f.do("GET", "/factgate/v1/knowledge", keyApp, "")
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	k := gjson.ParseBytes(b)
	if k.Get("can_edit").Bool() || k.Get(`sets.#(name=="ra3").overlay.version`).Int() != 1 || k.Get(`sets.#(name=="ra3").overlay.path`).Exists() ||
		!k.Get(`routes.#(name=="ra3-analyst").injects`).Bool() || k.Get(`routes.#(name=="plain").injects`).Bool() ||
		k.Get(`sets.#(name=="ra3").dimensions.0.values.0`).Str != "盟军" {
		t.Fatalf("overview for a client: %s", abbreviate(b))
	}
	status, _, b = f.do("GET", "/factgate/v1/knowledge/render?set=ra3&scope.factions=%E7%9B%9F%E5%86%9B,%E7%81%AB%E6%98%9F", keyApp, "")
	r := gjson.ParseBytes(b)
	if status != 200 || r.Get("injected").Bool() || !strings.Contains(r.Get("prompt").Str, "AlliedMCV") || r.Get("unknown.0").Str != "factions/火星" {
		t.Fatalf("render without route: %d %s", status, abbreviate(b))
	}
	if status, _, b := f.do("GET", "/factgate/v1/knowledge/render?set=dnd&route=ra3-analyst", keyApp, ""); status != 400 {
		t.Fatalf("a set of another pack: %d %s", status, b)
	}
	if status, _, _ := f.do("GET", "/factgate/v1/knowledge/sets/nope", keyApp, ""); status != 404 {
		t.Fatalf("an unknown set: %d", status)
	}
}
