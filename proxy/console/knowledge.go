package console

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// ScopeRef names a scope in the API: {"dimension": "factions", "value": "盟军"};
// the global scope has an empty dimension.
type ScopeRef struct {
	Dimension string `json:"dimension"`
	Value     string `json:"value"`
}

func (s ScopeRef) scope() knowledge.Scope {
	return knowledge.Scope{Dimension: s.Dimension, Value: s.Value}
}

// SetInfo describes one knowledge set for the knowledge page.
type SetInfo struct {
	Name       string          `json:"name"`
	Pack       string          `json:"pack"`
	Language   string          `json:"language"`
	Default    bool            `json:"default,omitempty"`
	Dimensions []DimensionInfo `json:"dimensions"`
	// Tags are the tags an entry of the set may carry (the built-in taxonomy and
	// the set's own; specialPower:<Name> is always allowed besides).
	Tags    []string     `json:"tags"`
	Entries int          `json:"entries"`
	Version uint64       `json:"version"`
	Overlay *OverlayInfo `json:"overlay,omitempty"`
}

// DimensionInfo is a scope dimension with its values in order.
type DimensionInfo struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// OverlayInfo is the state of a set's overlay file.
type OverlayInfo struct {
	// Path is the file (shown to admins only).
	Path      string    `json:"path,omitempty"`
	Version   uint64    `json:"version"`
	Present   bool      `json:"present"`
	LoadedAt  time.Time `json:"loaded_at,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	// ETag identifies the file's content; an edit sends it back so that a change
	// made meanwhile (another admin, a hand edit) is not overwritten.
	ETag string `json:"etag"`
}

// handleKnowledge serves GET /factgate/v1/knowledge: the packs' sets with their
// dimensions, tags and overlay state, and the routes whose injected prompt can be
// previewed.
func (c *Console) handleKnowledge(rc *fasthttp.RequestCtx, v Viewer) {
	if !rc.IsGet() && !rc.IsHead() {
		methodNotAllowed(rc, "GET")
		return
	}
	type routeInfo struct {
		Name    string `json:"name"`
		Pack    string `json:"pack,omitempty"`
		Injects bool   `json:"injects"`
	}
	out := struct {
		Sets    []SetInfo   `json:"sets"`
		Routes  []routeInfo `json:"routes"`
		CanEdit bool        `json:"can_edit"`
	}{Sets: []SetInfo{}, Routes: []routeInfo{}, CanEdit: v.MayEdit()}
	for _, p := range c.lib.Registry().Packs() {
		for _, name := range p.SetNames() {
			out.Sets = append(out.Sets, c.setInfo(name, p, v))
		}
	}
	for _, rt := range c.routes {
		ri := routeInfo{Name: rt.Name, Injects: rt.Preview != nil}
		if rt.Pack != nil {
			ri.Pack = rt.Pack.Name
		}
		out.Routes = append(out.Routes, ri)
	}
	writeJSON(rc, 200, out)
}

func (c *Console) setInfo(name string, p *knowledge.Pack, v Viewer) SetInfo {
	set, _ := c.lib.Set(name)
	si := SetInfo{Name: name, Pack: p.Name, Language: set.Language, Default: p.DefaultSet == name, Version: set.Version,
		Tags: append(knowledge.BuiltinTags(), set.Taxonomy...), Dimensions: []DimensionInfo{}}
	si.Entries = len(set.Global())
	for _, dim := range set.Dimensions {
		values := set.ScopeValues(dim)
		si.Dimensions = append(si.Dimensions, DimensionInfo{Name: dim, Values: values})
		for _, val := range values {
			si.Entries += len(set.ScopeEntries(dim, val))
		}
	}
	if path, ok := c.lib.OverlayPath(name); ok {
		si.Overlay = c.overlayInfo(name, path, v)
	}
	return si
}

func (c *Console) overlayInfo(set, path string, v Viewer) *OverlayInfo {
	oi := &OverlayInfo{ETag: fileETag(path)}
	for _, st := range c.lib.OverlayStatus() {
		if st.Set == set {
			oi.Version, oi.Present, oi.LoadedAt, oi.LastError = st.Version, st.Present, st.LoadedAt, st.LastError
		}
	}
	if v.Admin {
		oi.Path = path
	}
	return oi
}

// fileETag is a short hash of the file's content, "absent" when it does not exist.
func fileETag(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "absent"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// EntryView is an entry of the effective set, or a built-in one the overlay
// disabled, with where it comes from.
type EntryView struct {
	ID    string   `json:"id"`
	Tags  []string `json:"tags"`
	Text  string   `json:"text"`
	Asset string   `json:"asset,omitempty"`
	// Origin is "builtin" (as the pack ships it), "overridden" (the overlay
	// replaced it), "added" (only the overlay has it) or "disabled" (the overlay
	// removed it; not rendered).
	Origin string `json:"origin"`
}

// ScopeView is one scope's entries in render order.
type ScopeView struct {
	Dimension string      `json:"dimension"`
	Value     string      `json:"value"`
	Entries   []EntryView `json:"entries"`
}

// handleKnowledgeSub serves the paths under /factgate/v1/knowledge/: render,
// sets/{set} and sets/{set}/entries.
func (c *Console) handleKnowledgeSub(rc *fasthttp.RequestCtx, v Viewer) {
	p := string(rc.Path())
	switch {
	case p == knowledgeRender:
		c.handleRender(rc)
	case strings.HasPrefix(p, knowledgeSets) && strings.HasSuffix(p, "/entries"):
		c.handleEdit(rc, v, strings.TrimSuffix(p[len(knowledgeSets):], "/entries"))
	case strings.HasPrefix(p, knowledgeSets) && !strings.Contains(p[len(knowledgeSets):], "/"):
		c.handleSet(rc, v, p[len(knowledgeSets):])
	default:
		writeError(rc, interceptors.Errorf(404, "invalid_request_error", "not_found", "no factgate endpoint at %s", p))
	}
}

func (c *Console) unknownSet(name string) *interceptors.Error {
	return interceptors.Errorf(404, "invalid_request_error", "unknown_knowledge_set", "unknown knowledge set %q (known: %s)",
		name, strings.Join(c.lib.Registry().SetNames(), ", "))
}

// handleSet serves GET /factgate/v1/knowledge/sets/{set}: every scope's entries
// of the effective set, each marked with its origin.
func (c *Console) handleSet(rc *fasthttp.RequestCtx, v Viewer, name string) {
	if !rc.IsGet() && !rc.IsHead() {
		methodNotAllowed(rc, "GET")
		return
	}
	set, p := c.lib.Set(name)
	if set == nil {
		writeError(rc, c.unknownSet(name))
		return
	}
	base, _ := c.lib.Registry().Set(name)
	out := struct {
		SetInfo
		Scopes []ScopeView `json:"scopes"`
	}{SetInfo: c.setInfo(name, p, v)}
	view := func(sc knowledge.Scope, entries []knowledge.Entry) {
		sv := ScopeView{Dimension: sc.Dimension, Value: sc.Value, Entries: []EntryView{}}
		for _, e := range entries {
			ev := EntryView{ID: e.ID, Tags: e.Tags, Text: e.Text, Asset: e.Asset, Origin: "added"}
			if b, ok := base.Entry(sc.Dimension, sc.Value, e.ID); ok {
				ev.Origin = "overridden"
				if b.Text == e.Text && slices.Equal(b.Tags, e.Tags) {
					ev.Origin = "builtin"
				}
			}
			sv.Entries = append(sv.Entries, ev)
		}
		for _, b := range base.ScopeEntries(sc.Dimension, sc.Value) {
			if !set.Has(sc.Dimension, sc.Value, b.ID) {
				sv.Entries = append(sv.Entries, EntryView{ID: b.ID, Tags: b.Tags, Text: b.Text, Asset: b.Asset, Origin: "disabled"})
			}
		}
		out.Scopes = append(out.Scopes, sv)
	}
	view(knowledge.GlobalScope, set.Global())
	for _, dim := range set.Dimensions {
		for _, val := range set.ScopeValues(dim) {
			view(knowledge.Scope{Dimension: dim, Value: val}, set.ScopeEntries(dim, val))
		}
	}
	writeJSON(rc, 200, out)
}

// handleRender serves GET /factgate/v1/knowledge/render?set=S&route=R&scope.<dim>=v1,v2:
// the system prompt for that context exactly as the route injects it (knowledge,
// contract, additional rules), or — without route, or for a route that does not
// inject — the rendered knowledge alone. Scope values keep the order given
// (factions in player order).
func (c *Console) handleRender(rc *fasthttp.RequestCtx) {
	if !rc.IsGet() && !rc.IsHead() {
		methodNotAllowed(rc, "GET")
		return
	}
	args := rc.QueryArgs()
	name, routeName := string(args.Peek("set")), string(args.Peek("route"))
	var rt *Route
	if routeName != "" {
		for i := range c.routes {
			if c.routes[i].Name == routeName {
				rt = &c.routes[i]
			}
		}
		if rt == nil {
			writeError(rc, interceptors.Errorf(404, "invalid_request_error", "unknown_route", "no route named %q", routeName))
			return
		}
		if name == "" && rt.Pack != nil {
			name = rt.Pack.DefaultSet
		}
	}
	set, p := c.lib.Set(name)
	if set == nil {
		writeError(rc, c.unknownSet(name))
		return
	}
	if rt != nil && rt.Pack != nil && rt.Pack != p {
		writeError(rc, interceptors.Errorf(400, "invalid_request_error", "unknown_knowledge_set",
			"knowledge set %q is not a set of route %s's pack %s (its sets: %s)", name, rt.Name, rt.Pack.Name, strings.Join(rt.Pack.SetNames(), ", ")))
		return
	}
	scopes := knowledge.Scopes{}
	var unknown []string
	for k, val := range args.All() {
		dim, ok := strings.CutPrefix(string(k), "scope.")
		if !ok {
			continue
		}
		for _, s := range strings.Split(string(val), ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			scopes[dim] = append(scopes[dim], s)
			if !set.HasScope(dim, s) {
				unknown = append(unknown, dim+"/"+s)
			}
		}
	}
	out := struct {
		Set     string           `json:"set"`
		Version uint64           `json:"version"`
		Route   string           `json:"route,omitempty"`
		Scopes  knowledge.Scopes `json:"scopes"`
		// Injected is true when Prompt is what the route injects (knowledge,
		// contract, rules); false when it is the rendered knowledge alone.
		Injected bool   `json:"injected"`
		Prompt   string `json:"prompt"`
		Bytes    int    `json:"bytes"`
		// Unknown are scope values the set does not have (skipped, as on a request).
		Unknown []string `json:"unknown,omitempty"`
	}{Set: name, Version: set.Version, Scopes: scopes, Unknown: unknown}
	if rt != nil && rt.Preview != nil {
		out.Route, out.Injected = rt.Name, true
		out.Prompt = rt.Preview(set, scopes)
	} else {
		out.Prompt, _ = c.lib.Render(name, scopes)
	}
	out.Bytes = len(out.Prompt)
	writeJSON(rc, 200, out)
}

// EditRequest is the body of POST /factgate/v1/knowledge/sets/{set}/entries.
type EditRequest struct {
	// Action is "put" (add or override the entry), "disable" (remove a built-in
	// entry from the effective set; an entry only the overlay adds is deleted)
	// or "revert" (take the entry out of the overlay: back to the built-in one).
	Action string   `json:"action"`
	Scope  ScopeRef `json:"scope"`
	// Entry is the entry to put; for disable and revert only its id counts.
	Entry knowledge.Entry `json:"entry"`
	// ETag is the overlay's etag the edit started from; a file changed since is a
	// 409. Empty skips the check.
	ETag string `json:"etag"`
	// DryRun lints and diffs without writing: the preview before saving.
	DryRun bool `json:"dry_run"`
}

// EditResult says what an edit did (or, with dry_run, would do).
type EditResult struct {
	Written bool     `json:"written"`
	Action  string   `json:"action"`
	Scope   ScopeRef `json:"scope"`
	ID      string   `json:"id"`
	// Builtin is the pack's entry (nil when only the overlay has it); Before and
	// After are the effective entry before and after the edit (nil: absent).
	Builtin *knowledge.Entry `json:"builtin"`
	Before  *knowledge.Entry `json:"before"`
	After   *knowledge.Entry `json:"after"`
	// TextDiff turns the built-in text (or nothing) into the text after the edit;
	// TagsAdded and TagsRemoved compare the tags the same way.
	TextDiff    []DiffOp     `json:"text_diff"`
	TagsAdded   []string     `json:"tags_added"`
	TagsRemoved []string     `json:"tags_removed"`
	Overlay     *OverlayInfo `json:"overlay"`
}

// Problem is one lint finding, as knowledge.SetError.
type Problem struct {
	Scope   string `json:"scope,omitempty"`
	Entry   string `json:"entry,omitempty"`
	Field   string `json:"field,omitempty"`
	Problem string `json:"problem"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

func problems(err error) []Problem {
	var list knowledge.SetErrors
	if !errors.As(err, &list) {
		return []Problem{{Problem: err.Error(), Message: err.Error()}}
	}
	out := make([]Problem, 0, len(list))
	for _, e := range list {
		out = append(out, Problem{Scope: e.Scope, Entry: e.Entry, Field: e.Field, Problem: e.Problem, Line: e.Line, Column: e.Column, Message: e.Error()})
	}
	return out
}

// writeProblems answers an error with the lint findings beside the envelope.
func writeProblems(rc *fasthttp.RequestCtx, e *interceptors.Error, list []Problem) {
	var env map[string]any
	_ = json.Unmarshal(e.Envelope(), &env)
	env["problems"] = list
	writeJSON(rc, e.Status, env)
}

// handleEdit serves POST /factgate/v1/knowledge/sets/{set}/entries (admins): it
// reads the set's overlay file, applies the edit, lints the result exactly as
// loading does (unknown tag, duplicate id, empty text...: 422 with every problem,
// nothing written), writes it atomically (a temporary file renamed over the
// overlay), reloads it at once so that the next request carries it, and logs an
// audit line.
func (c *Console) handleEdit(rc *fasthttp.RequestCtx, v Viewer, name string) {
	if !rc.IsPost() {
		methodNotAllowed(rc, "POST")
		return
	}
	if !v.MayEdit() {
		writeError(rc, interceptors.Errorf(403, "permission_error", "admin_required", "editing knowledge needs an admin key (auth.keys[].admin: true)"))
		return
	}
	var req EditRequest
	if err := json.Unmarshal(rc.PostBody(), &req); err != nil {
		writeError(rc, interceptors.Errorf(400, "invalid_request_error", "invalid_json", "the edit is not valid JSON: %v", err))
		return
	}
	if unknown := unknownEditFields(rc.PostBody()); len(unknown) > 0 {
		e := interceptors.Errorf(400, "invalid_request_error", "unknown_parameter",
			"the edit has fields the API does not know, so nothing was written: %s (an edit has action, scope {dimension, value}, entry {id, tags, text}, etag, dry_run)",
			strings.Join(unknown, ", "))
		e.Param = unknown[0]
		writeError(rc, e)
		return
	}
	if n, limit := entryBytes(req.Entry), int(c.cfg.MaxEntryBytes); req.Action == "put" && limit > 0 && n > limit {
		writeError(rc, interceptors.Errorf(413, "invalid_request_error", "entry_too_large",
			"the entry is %d bytes (id, tags and text); the limit is %d bytes (console.max_entry_bytes); nothing was written", n, limit))
		return
	}
	base, _ := c.lib.Registry().Set(name)
	if base == nil {
		writeError(rc, c.unknownSet(name))
		return
	}
	path, ok := c.lib.OverlayPath(name)
	if !ok {
		writeError(rc, interceptors.Errorf(409, "invalid_request_error", "no_overlay",
			"knowledge set %q has no overlay file: add knowledge.overlays.%s: FILE to the config to edit it", name, name))
		return
	}
	sc, id := req.Scope.scope(), req.Entry.ID
	if sc.Dimension != "" && sc.Value == "" {
		writeError(rc, interceptors.Errorf(400, "invalid_request_error", "bad_request", "scope %q has no value", sc.Dimension))
		return
	}

	c.editMu.Lock()
	defer c.editMu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		writeError(rc, interceptors.Errorf(500, "server_error", "overlay_unreadable", "reading overlay %s: %v", path, err))
		return
	}
	if req.ETag != "" && req.ETag != fileETag(path) {
		writeError(rc, interceptors.Errorf(409, "invalid_request_error", "overlay_changed",
			"the overlay of %s changed since you opened it; reload the entry and edit again", name))
		return
	}
	file, err := knowledge.ParseOverlayFile(data, path, base)
	if err != nil {
		writeProblems(rc, interceptors.Errorf(409, "invalid_request_error", "overlay_invalid",
			"the overlay file %s is invalid as it is on disk; fix it by hand first", filepath.Base(path)), problems(err))
		return
	}
	cur, _ := c.lib.Set(name)
	res := EditResult{Action: req.Action, Scope: req.Scope, ID: id, TagsAdded: []string{}, TagsRemoved: []string{}}
	if b, ok := base.Entry(sc.Dimension, sc.Value, id); ok {
		res.Builtin = &b
	}
	if e, ok := cur.Entry(sc.Dimension, sc.Value, id); ok {
		res.Before = &e
	}
	switch req.Action {
	case "put":
		e := knowledge.Entry{ID: id, Tags: req.Entry.Tags, Text: req.Entry.Text}
		if e.Tags == nil {
			e.Tags = []string{}
		}
		file.Put(sc, e)
	case "disable":
		switch {
		case res.Builtin != nil:
			file.Put(sc, knowledge.Entry{ID: id, Tags: []string{}, Disabled: true})
		case !file.Remove(sc, id):
			writeError(rc, interceptors.Errorf(404, "invalid_request_error", "entry_not_found", "scope %s of %s has no entry %q", sc, name, id))
			return
		}
	case "revert":
		if !file.Remove(sc, id) {
			writeError(rc, interceptors.Errorf(404, "invalid_request_error", "entry_not_found", "the overlay of %s has no entry %q in scope %s", name, id, sc))
			return
		}
	default:
		writeError(rc, interceptors.Errorf(400, "invalid_request_error", "bad_request", "action %q is not put, disable or revert", req.Action))
		return
	}
	out := file.JSON()
	next, err := base.WithOverlay(out, path)
	if err != nil {
		writeProblems(rc, interceptors.Errorf(422, "invalid_request_error", "knowledge_invalid",
			"the edit makes the knowledge set invalid; nothing was written"), problems(err))
		return
	}
	if e, ok := next.Entry(sc.Dimension, sc.Value, id); ok {
		res.After = &e
	}
	var from, to knowledge.Entry
	if res.Builtin != nil {
		from = *res.Builtin
	}
	if res.After != nil {
		to = *res.After
	}
	res.TextDiff = Diff(from.Text, to.Text)
	for _, t := range to.Tags {
		if !slices.Contains(from.Tags, t) {
			res.TagsAdded = append(res.TagsAdded, t)
		}
	}
	for _, t := range from.Tags {
		if !slices.Contains(to.Tags, t) {
			res.TagsRemoved = append(res.TagsRemoved, t)
		}
	}
	if req.DryRun {
		res.Overlay = c.overlayInfo(name, path, v)
		writeJSON(rc, 200, res)
		return
	}
	if err := writeAtomically(path, out); err != nil {
		writeError(rc, interceptors.Errorf(500, "server_error", "overlay_not_written", "writing overlay %s: %v", path, err))
		return
	}
	st, err := c.lib.ReloadOverlay(name)
	if err != nil {
		// Linted above with the same code, so only a concurrent hand edit gets here.
		writeError(rc, interceptors.Errorf(500, "server_error", "overlay_not_loaded", "the overlay was written but did not load: %v", err))
		return
	}
	res.Written = true
	res.Overlay = c.overlayInfo(name, path, v)
	c.log.Info("knowledge overlay edited", "who", v.Name, "set", name, "scope", sc.String(), "entry", id,
		"action", req.Action, "path", path, "version", st.Version)
	writeJSON(rc, 200, res)
}

// editFields are the fields an edit may have, by object ("" is the top level).
var editFields = map[string][]string{
	"":      {"action", "scope", "entry", "etag", "dry_run"},
	"scope": {"dimension", "value"},
	"entry": {"id", "tags", "text"},
}

// unknownEditFields names the fields of an edit that the API does not know
// ("colour", "entry.asset"), in the order they appear: an edit is refused
// rather than saved without them.
func unknownEditFields(body []byte) []string {
	var out []string
	check := func(obj gjson.Result, path string) {
		obj.ForEach(func(k, _ gjson.Result) bool {
			if !slices.Contains(editFields[path], k.Str) {
				if path != "" {
					out = append(out, path+"."+k.Str)
				} else {
					out = append(out, k.Str)
				}
			}
			return true
		})
	}
	root := gjson.ParseBytes(body)
	check(root, "")
	for _, sub := range []string{"scope", "entry"} {
		if v := root.Get(sub); v.IsObject() {
			check(v, sub)
		}
	}
	return out
}

// entryBytes is what console.max_entry_bytes bounds: an entry's id, tags and
// text together.
func entryBytes(e knowledge.Entry) int {
	n := len(e.ID) + len(e.Text)
	for _, t := range e.Tags {
		n += len(t)
	}
	return n
}

// writeAtomically replaces path with data: a temporary file in the same folder,
// synced, then renamed over it, so that the watcher and every reader see either
// the old file or the new one, never a half-written one. The file keeps its mode.
func writeAtomically(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(name)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(name, mode); err != nil {
		return fmt.Errorf("setting the mode: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	ok = true
	return nil
}
