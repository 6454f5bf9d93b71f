package console

import (
	"context"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

// RequestView is the body of GET /factgate/v1/requests/{trace_id}: the trace as
// stored (every field, those this version does not know included) and what the
// trace page draws from it.
type RequestView struct {
	// Summary is the request's line of the list, when this replica still has it.
	Summary *Summary `json:"summary,omitempty"`
	// Trace is the stored trace, byte for byte.
	Trace json.RawMessage `json:"trace"`
	// Attempts has, per attempt of the trace, its content cut into segments with
	// the issues that point into each.
	Attempts []AttemptView `json:"attempts"`
	// Returned is the index of the attempt returned (the trace's final attempt).
	Returned int `json:"returned"`
	// Diff turns the draft into the returned attempt; empty when they are the
	// same attempt or the trace kept no content.
	Diff []DiffOp `json:"diff"`
}

// AttemptView is one attempt's content with its issues located.
type AttemptView struct {
	// Segments cut the content so that each piece is covered by the same issues
	// (indexes into the attempt's issues); their texts join to the content.
	Segments []Segment `json:"segments"`
	// Unplaced are the issues that point at no claim in the content (the whole
	// block, a missing block, a root-level problem).
	Unplaced []int `json:"unplaced"`
}

// Segment is a piece of an attempt's content.
type Segment struct {
	Text   string `json:"text"`
	Issues []int  `json:"issues,omitempty"`
}

// handleRequest serves GET /factgate/v1/requests/{trace_id}. A trace the viewer
// may not read answers 404 exactly like a missing one, so that trace ids cannot
// be probed.
func (c *Console) handleRequest(rc *fasthttp.RequestCtx, v Viewer) {
	if !rc.IsGet() && !rc.IsHead() {
		methodNotAllowed(rc, "GET")
		return
	}
	id := string(rc.Path()[len(RequestPrefix):])
	notFound := interceptors.Errorf(404, "invalid_request_error", "trace_not_found",
		"no trace %q (traces are kept for traces.ttl after the request)", id)
	if c.traces == nil || !validTraceID(id) {
		writeError(rc, notFound)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, ok, err := c.traces(ctx, id)
	if err != nil {
		writeError(rc, interceptors.Errorf(503, "server_error", "trace_store_unavailable", "reading trace %s: %v", id, err))
		return
	}
	if !ok {
		writeError(rc, notFound)
		return
	}
	var tr interceptors.Trace
	if err := json.Unmarshal(b, &tr); err != nil {
		writeError(rc, interceptors.Errorf(500, "server_error", "internal_error", "trace %s is not readable: %v", id, err))
		return
	}
	if !v.MayRead(tr.ClientKey) {
		writeError(rc, notFound)
		return
	}
	view := c.viewTrace(&tr, b)
	if s, ok := c.recent.find(id); ok {
		view.Summary = &s
	}
	writeJSON(rc, 200, view)
}

var traceIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func validTraceID(id string) bool { return traceIDPattern.MatchString(id) }

// viewTrace locates each attempt's issues in its content and diffs the draft
// against the attempt returned.
func (c *Console) viewTrace(tr *interceptors.Trace, raw []byte) RequestView {
	view := RequestView{Trace: raw, Attempts: make([]AttemptView, len(tr.Attempts)), Diff: []DiffOp{}}
	parser := c.claimsParser(tr.Route)
	for i, a := range tr.Attempts {
		view.Attempts[i] = locateIssues(parser, a.Content, a.Issues)
	}
	if tr.Final != nil && tr.Final.Attempt >= 0 && tr.Final.Attempt < len(tr.Attempts) {
		view.Returned = tr.Final.Attempt
	}
	if view.Returned > 0 {
		draft, returned := tr.Attempts[0].Content, tr.Attempts[view.Returned].Content
		if draft != "" || returned != "" {
			view.Diff = Diff(draft, returned)
		}
	}
	return view
}

// claimsParser is the claims parser of the route's pack, to find the claims
// block; nil when the route has no pack with claims.
func (c *Console) claimsParser(route string) *claims.Parser {
	var pack *knowledge.Pack
	for _, rt := range c.routes {
		if rt.Name == route {
			pack = rt.Pack
		}
	}
	if pack == nil || pack.Claims == nil {
		return nil
	}
	p, err := claims.NewParser(pack.Claims, nil)
	if err != nil {
		return nil
	}
	return p
}

// issuePath turns an issue path ("unitClaims[2].evidence[1]") into a gjson
// path ("unitClaims.2.evidence.1").
func issuePath(p string) string {
	return strings.NewReplacer("[", ".", "]", "").Replace(p)
}

// locateIssues cuts content into segments by where each issue's claim (or the
// evidence it names) lies in the claims block.
func locateIssues(p *claims.Parser, content string, issues []interceptors.Issue) AttemptView {
	av := AttemptView{Unplaced: []int{}}
	type span struct{ start, end, issue int }
	var spans []span
	var block string
	start := -1
	if p != nil && content != "" {
		if loc := p.Locate(content); loc.Found && loc.Span.End <= len(content) {
			block, start = content[loc.Span.Start:loc.Span.End], loc.Span.Start
		}
	}
	for i, is := range issues {
		placed := false
		if start >= 0 && strings.Contains(is.Path, "[") {
			if r := gjson.Get(block, issuePath(is.Path)); r.Exists() && r.Index > 0 && r.Index+len(r.Raw) <= len(block) {
				spans = append(spans, span{start + r.Index, start + r.Index + len(r.Raw), i})
				placed = true
			}
		}
		if !placed {
			av.Unplaced = append(av.Unplaced, i)
		}
	}
	// Cut at every span boundary; each piece lists the spans covering it.
	cuts := []int{0, len(content)}
	for _, s := range spans {
		cuts = append(cuts, s.start, s.end)
	}
	sort.Ints(cuts)
	for k := 0; k+1 < len(cuts); k++ {
		a, b := cuts[k], cuts[k+1]
		if a == b {
			continue
		}
		seg := Segment{Text: content[a:b]}
		for _, s := range spans {
			if s.start <= a && b <= s.end {
				seg.Issues = append(seg.Issues, s.issue)
			}
		}
		if n := len(av.Segments); n > 0 && len(seg.Issues) == 0 && len(av.Segments[n-1].Issues) == 0 {
			av.Segments[n-1].Text += seg.Text
			continue
		}
		av.Segments = append(av.Segments, seg)
	}
	if av.Segments == nil {
		av.Segments = []Segment{}
	}
	return av
}
