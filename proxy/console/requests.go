package console

import (
	"bufio"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// Summary is one intercepted request as the requests page lists it.
type Summary struct {
	// Seq orders the summaries of one replica (the live feed's event id).
	Seq     uint64    `json:"seq"`
	TraceID string    `json:"trace_id"`
	Time    time.Time `json:"time"`
	Route   string    `json:"route"`
	Model   string    `json:"model"`
	Variant string    `json:"variant,omitempty"`
	// Client is the client key's name ("" in auth mode passthrough).
	Client string `json:"client,omitempty"`
	Status int    `json:"status"`
	// Error is the error code when the request failed.
	Error        string `json:"error,omitempty"`
	Stream       bool   `json:"stream,omitempty"`
	KnowledgeSet string `json:"knowledge_set,omitempty"`
	// Validated reports that the draft was checked; the issue counts are then set.
	Validated bool `json:"validated"`
	// DraftIssues, FinalIssues and DeliveredIssues count by severity, as
	// X-Factgate-Issues does ("C1,E2", "0"), the issues of the first draft, of the
	// answer returned as validated, and of that answer as the client received it
	// (after the revision step's downgrade). The requests page shows draft →
	// delivered.
	DraftIssues     string `json:"draft_issues,omitempty"`
	FinalIssues     string `json:"final_issues,omitempty"`
	DeliveredIssues string `json:"delivered_issues,omitempty"`
	// DraftWorst is the draft's most severe issue ("Contradiction"), "" when none.
	DraftWorst string `json:"draft_worst,omitempty"`
	// Outcome is the revision step's ("accepted", "resolved", "improved",
	// "downgraded", "failed").
	Outcome    string             `json:"outcome,omitempty"`
	Revisions  int                `json:"revisions"`
	Downgrades int                `json:"downgrades,omitempty"`
	Tokens     interceptors.Usage `json:"tokens"`
	LatencyMS  float64            `json:"latency_ms"`
	Incomplete bool               `json:"validation_incomplete,omitempty"`

	draftWorst interceptors.Severity
}

// Summarize makes the summary of a finished intercepted request. It reads the
// exchange and its trace once the chain is done with them.
func Summarize(ex *interceptors.Exchange, status int, errCode string, latency time.Duration) Summary {
	s := Summary{
		Time:      time.Now(),
		Route:     ex.Route,
		Model:     ex.Model,
		Client:    ex.ClientKey,
		Status:    status,
		Error:     errCode,
		Stream:    ex.Stream,
		Revisions: ex.Revisions,
		Tokens:    ex.Usage,
		LatencyMS: float64(latency) / float64(time.Millisecond),
		Variant:   ex.Overrides.Variant,
	}
	ex.Trace.Do(func(t *interceptors.Trace) {
		s.TraceID = t.ID
		s.Time = t.Started
		if t.Variant != "" {
			s.Variant = t.Variant
		}
		s.KnowledgeSet = t.KnowledgeSet
		s.Incomplete = t.ValidationIncomplete
		s.Downgrades = len(t.Downgrades)
		s.Validated = len(t.Attempts) > 0
		if t.Final != nil {
			s.Outcome = t.Final.Outcome
		}
	})
	if s.Validated {
		s.DraftIssues = interceptors.CountSeverities(ex.DraftIssues).String()
		s.FinalIssues = interceptors.CountSeverities(ex.Issues).String()
		s.DeliveredIssues = interceptors.CountSeverities(ex.DeliveredIssues).String()
		if w, ok := interceptors.MaxSeverity(ex.DraftIssues); ok {
			s.DraftWorst, s.draftWorst = w.String(), w
		}
	}
	return s
}

// recentRequests is the bounded ring of this replica's recent summaries, with
// the live feed's subscribers.
type recentRequests struct {
	mu   sync.Mutex
	ring []Summary // ring[(start+i)%cap] oldest first
	n    int
	next uint64
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch chan Summary
}

// subscriberBuffer bounds what a slow live feed may fall behind; beyond it the
// feed is ended and the browser reconnects, catching up from the ring.
const subscriberBuffer = 256

func newRecentRequests(capacity int) *recentRequests {
	if capacity <= 0 {
		capacity = DefaultRecentRequests
	}
	return &recentRequests{ring: make([]Summary, capacity), next: 1, subs: map[*subscriber]struct{}{}}
}

// Record adds a finished request to the list and the live feeds.
func (c *Console) Record(s Summary) { c.recent.add(s) }

func (r *recentRequests) add(s Summary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Seq = r.next
	r.next++
	r.ring[(s.Seq-1)%uint64(len(r.ring))] = s
	if r.n < len(r.ring) {
		r.n++
	}
	for sub := range r.subs {
		select {
		case sub.ch <- s:
		default:
			close(sub.ch)
			delete(r.subs, sub)
		}
	}
}

// each calls f for the kept summaries, newest first, until f returns false.
func (r *recentRequests) each(f func(Summary) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < r.n; i++ {
		seq := r.next - 1 - uint64(i)
		if !f(r.ring[(seq-1)%uint64(len(r.ring))]) {
			return
		}
	}
}

func (r *recentRequests) find(traceID string) (Summary, bool) {
	var out Summary
	found := false
	r.each(func(s Summary) bool {
		if s.TraceID == traceID {
			out, found = s, true
			return false
		}
		return true
	})
	return out, found
}

// subscribe returns a live feed and the summaries after seq still kept (oldest
// first), taken under one lock so that none falls between them.
func (r *recentRequests) subscribe(after uint64) (*subscriber, []Summary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sub := &subscriber{ch: make(chan Summary, subscriberBuffer)}
	r.subs[sub] = struct{}{}
	var backlog []Summary
	for i := r.n - 1; i >= 0; i-- {
		seq := r.next - 1 - uint64(i)
		if seq > after {
			backlog = append(backlog, r.ring[(seq-1)%uint64(len(r.ring))])
		}
	}
	return sub, backlog
}

func (r *recentRequests) unsubscribe(sub *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.subs[sub]; ok {
		delete(r.subs, sub)
		close(sub.ch)
	}
}

// requestFilter is the requests page's query.
type requestFilter struct {
	route, variant, client, outcome, status, q string
	revised                                    *bool
	minSeverity                                *interceptors.Severity
}

func parseFilter(args *fasthttp.Args) (requestFilter, *interceptors.Error) {
	f := requestFilter{
		route:   string(args.Peek("route")),
		variant: string(args.Peek("variant")),
		client:  string(args.Peek("client")),
		outcome: string(args.Peek("outcome")),
		status:  string(args.Peek("status")),
		q:       strings.ToLower(string(args.Peek("q"))),
	}
	if v := string(args.Peek("revised")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, interceptors.Errorf(400, "invalid_request_error", "invalid_filter", "revised: %q is not true or false", v)
		}
		f.revised = &b
	}
	if v := string(args.Peek("min_severity")); v != "" {
		s, err := interceptors.ParseSeverity(v)
		if err != nil {
			return f, interceptors.Errorf(400, "invalid_request_error", "invalid_filter", "min_severity: %v", err)
		}
		f.minSeverity = &s
	}
	switch f.status {
	case "", "ok", "error", "2xx", "4xx", "5xx":
	default:
		if _, err := strconv.Atoi(f.status); err != nil {
			return f, interceptors.Errorf(400, "invalid_request_error", "invalid_filter", "status: %q is not ok, error, 2xx, 4xx, 5xx or a status code", f.status)
		}
	}
	return f, nil
}

func (f requestFilter) match(s Summary) bool {
	switch {
	case f.route != "" && s.Route != f.route,
		f.variant != "" && s.Variant != f.variant,
		f.client != "" && s.Client != f.client,
		f.outcome != "" && s.Outcome != f.outcome,
		f.revised != nil && (s.Revisions > 0) != *f.revised,
		f.minSeverity != nil && (s.DraftWorst == "" || s.draftWorst < *f.minSeverity):
		return false
	}
	switch f.status {
	case "":
	case "ok":
		if s.Status >= 400 {
			return false
		}
	case "error":
		if s.Status < 400 {
			return false
		}
	case "2xx", "4xx", "5xx":
		if s.Status/100 != int(f.status[0]-'0') {
			return false
		}
	default:
		if strconv.Itoa(s.Status) != f.status {
			return false
		}
	}
	if f.q != "" {
		hay := strings.ToLower(s.TraceID + " " + s.Route + " " + s.Model + " " + s.Variant + " " + s.Client + " " + s.KnowledgeSet + " " + s.Outcome + " " + s.Error)
		if !strings.Contains(hay, f.q) {
			return false
		}
	}
	return true
}

// handleRequests serves GET /factgate/v1/requests: this replica's recent
// intercepted requests the viewer may read, newest first, filtered by route,
// variant, client, status, outcome, revised, min_severity (of the draft) and q
// (a substring of the trace id, route, model, variant, client, set, outcome);
// limit (default 100) and before (a seq: older ones) page through them.
func (c *Console) handleRequests(rc *fasthttp.RequestCtx, v Viewer) {
	if !rc.IsGet() && !rc.IsHead() {
		methodNotAllowed(rc, "GET")
		return
	}
	args := rc.QueryArgs()
	f, ferr := parseFilter(args)
	if ferr != nil {
		writeError(rc, ferr)
		return
	}
	limit := 100
	if s := string(args.Peek("limit")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(rc, interceptors.Errorf(400, "invalid_request_error", "invalid_filter", "limit: %q is not a positive number", s))
			return
		}
		limit = min(n, len(c.recent.ring))
	}
	var before uint64
	if s := string(args.Peek("before")); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			writeError(rc, interceptors.Errorf(400, "invalid_request_error", "invalid_filter", "before: %q is not a sequence number", s))
			return
		}
		before = n
	}
	out := struct {
		Requests []Summary `json:"requests"`
		// More reports that older matching requests exist (ask with before).
		More bool `json:"more"`
		// Kept is how many requests this replica keeps (console.recent_requests).
		Kept int `json:"kept"`
		// Routes, Variants and Clients are the values seen, for the filter menus.
		Routes   []string `json:"routes"`
		Variants []string `json:"variants"`
		Clients  []string `json:"clients,omitempty"`
	}{Requests: []Summary{}, Kept: len(c.recent.ring)}
	seen := map[string]map[string]bool{"r": {}, "v": {}, "c": {}}
	add := func(kind, val string, list *[]string) {
		if val != "" && !seen[kind][val] {
			seen[kind][val] = true
			*list = append(*list, val)
		}
	}
	for _, rt := range c.routes {
		add("r", rt.Name, &out.Routes)
	}
	c.recent.each(func(s Summary) bool {
		if !v.MayRead(s.Client) {
			return true
		}
		add("v", s.Variant, &out.Variants)
		if v.Admin {
			add("c", s.Client, &out.Clients)
		}
		if (before != 0 && s.Seq >= before) || !f.match(s) {
			return true
		}
		if len(out.Requests) == limit {
			out.More = true
			return true
		}
		out.Requests = append(out.Requests, s)
		return true
	})
	writeJSON(rc, 200, out)
}

// handleStream serves GET /factgate/v1/requests/stream: a server-sent event
// ("request", the Summary as JSON, id = its seq) for each request that finishes
// on this replica and matches the same filters as the list. With Last-Event-ID
// (the browser sends it when it reconnects) or ?after=SEQ, the kept requests
// after it come first. A comment every 15s keeps the connection open; the stream
// ends when the proxy drains, and — for a viewer authenticated by the session
// cookie — when the session ends: the feed checks its session in Redis at least
// every sessionRecheck (and before an event when the last check is older), and
// at once when a session ends on this replica, so it delivers nothing more than
// sessionRecheck after a logout or a key's revocation on any replica.
func (c *Console) handleStream(rc *fasthttp.RequestCtx, v Viewer) {
	if !rc.IsGet() {
		methodNotAllowed(rc, "GET")
		return
	}
	f, ferr := parseFilter(rc.QueryArgs())
	if ferr != nil {
		writeError(rc, ferr)
		return
	}
	var after uint64
	for _, s := range [][]byte{rc.Request.Header.Peek("Last-Event-ID"), rc.QueryArgs().Peek("after")} {
		if n, err := strconv.ParseUint(string(s), 10, 64); err == nil && n > after {
			after = n
		}
	}
	// The request's buffers are reused once the handler returns; the writer
	// keeps its own copy of the cookie.
	var token []byte
	if v.Session {
		token = append(token, rc.Request.Header.Cookie(CookieName)...)
	}
	sub, backlog := c.recent.subscribe(after)
	rc.SetStatusCode(200)
	rc.SetContentType("text/event-stream")
	rc.Response.Header.Set("Cache-Control", "no-cache")
	rc.Response.Header.Set("X-Accel-Buffering", "no")
	draining := c.draining
	rc.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer c.recent.unsubscribe(sub)
		last := after
		send := func(s Summary) bool {
			if s.Seq <= last {
				return true
			}
			last = s.Seq
			if !v.MayRead(s.Client) || !f.match(s) {
				return true
			}
			b, _ := json.Marshal(s)
			w.WriteString("id: " + strconv.FormatUint(s.Seq, 10) + "\nevent: request\ndata: ")
			w.Write(b)
			w.WriteString("\n\n")
			return true
		}
		w.WriteString("retry: 2000\n: connected\n\n")
		for _, s := range backlog {
			send(s)
		}
		if w.Flush() != nil {
			return
		}
		tick := time.NewTicker(drainCheckPeriod)
		defer tick.Stop()
		quiet, checked := time.Now(), time.Now()
		// alive reports whether the viewer's session still holds, asking Redis
		// when the last check is older than sessionRecheck (or now is set).
		alive := func(now bool) bool {
			if token == nil || (!now && time.Since(checked) < sessionRecheck) {
				return true
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _, ok := c.sessions.lookup(ctx, token, c.keys)
			checked = time.Now()
			return ok
		}
		ended := c.sessions.endedSignal()
		for {
			select {
			case s, ok := <-sub.ch:
				if !ok {
					return // fell behind: the browser reconnects and catches up
				}
				if !alive(false) {
					return
				}
				send(s)
				if w.Flush() != nil {
					return
				}
				quiet = time.Now()
			case <-ended:
				ended = c.sessions.endedSignal()
				if !alive(true) {
					return
				}
			case <-tick.C:
				if draining() || !alive(false) {
					return
				}
				if time.Since(quiet) >= sseKeepAlive {
					w.WriteString(": keep-alive\n\n")
					if w.Flush() != nil {
						return
					}
					quiet = time.Now()
				}
			}
		}
	})
}
