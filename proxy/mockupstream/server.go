// Package mockupstream is an OpenAI-compatible upstream that answers from a script. It
// is the upstream of factgate's tests, of "factgate demo" and of the benchmarks, and it
// ships as "factgate mock-upstream".
//
// It serves POST /v1/chat/completions (stream and non-stream, usage, include_usage),
// POST /v1/responses (the Responses API, stream and non-stream, from the same
// script; stored answers are read back with GET /v1/responses/{id}), GET /v1/models,
// and /echo/... (any method; it answers with the request it received).
// Answers come from a [Script]: ordered rules that match on the request (a regexp on
// the last user message, "the conversation already has an assistant turn", a header,
// ...) and answer with content, reasoning, latency, chunking, extra fields or a fault
// (a status with a body, a slow first byte, a mid-stream disconnect, malformed JSON).
//
// A Server records the requests it served (when [Options.Record] is set) so that tests
// can assert what reached the upstream.
package mockupstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModel is the model /v1/models lists when [Options.Models] is empty.
const DefaultModel = "mock-model"

// DefaultChunkSize is the number of runes per streamed event when neither the answer
// nor [Options.ChunkSize] says otherwise.
const DefaultChunkSize = 8

// maxRequestBody bounds what the mock reads of a request; more gets a 413.
const maxRequestBody = 64 << 20

// Options configure a Server. The zero Options serve the built-in echo answer at once,
// in chunks of DefaultChunkSize runes, list DefaultModel, and record nothing.
type Options struct {
	// Script answers the chat completions. Nil means no rules: every request gets the
	// built-in answer "mock answer: <last user message>".
	Script *Script
	// Models are the ids /v1/models lists. Empty means [DefaultModel]. The chat
	// endpoint answers any model; this list is only what the models endpoint says.
	Models []string
	// Latency is waited before each chat answer starts, unless the answer sets its
	// own. Zero means none.
	Latency time.Duration
	// ChunkSize is the default number of runes per streamed event. Zero means
	// DefaultChunkSize.
	ChunkSize int
	// ChunkDelay is the default wait between streamed events. Zero means none.
	ChunkDelay time.Duration
	// Record keeps every request (method, path, headers, body, timings, outcome) for
	// [Server.Requests]. False keeps nothing, which is what benchmarks want;
	// [Server.WaitFor] works either way.
	Record bool
	// Now is the clock for the "created" field. Nil means time.Now.
	Now func() time.Time
	// Indent writes the JSON the mock makes as many providers do (OpenAI's API,
	// servers that use Go's json.Encoder): indented by two spaces and ending with
	// a newline — the non-stream answers (chat.completion, response object) and
	// the mock's own errors. A streamed event's JSON is indented too, over several
	// "data:" lines, which the SSE format joins with newlines. Scripted fault
	// bodies are sent as written. SetIndent changes it while serving.
	Indent bool
}

// Server is the mock upstream. It is safe for concurrent use. Create it with [New],
// then Start (or Serve), and Close it when done.
type Server struct {
	opts      Options
	models    []string
	chunkSize int
	now       func() time.Time

	script    atomic.Pointer[compiledScript]
	scriptErr error
	indent    atomic.Bool

	// completionSeq numbers completions: "chatcmpl-mock-N"; responseSeq Responses
	// answers: "resp_mock_N".
	completionSeq atomic.Uint64
	responseSeq   atomic.Uint64

	http     *http.Server
	listener net.Listener
	url      string

	// recording and counting; see count for why the counters are atomic and
	// also guarded by mu.
	mu      sync.Mutex
	records []Recorded
	// stored are the Responses answers kept for GET /v1/responses/{id}, by id;
	// storedOrder their ids, oldest first.
	stored      map[string]storedResponse
	storedOrder []string
	finished    atomic.Int64
	started     atomic.Int64
	waiters     atomic.Int64
	notify      chan struct{}
}

// New builds a Server from opts. A script that does not compile is reported by Start
// or Serve, before anything is served.
func New(opts Options) *Server {
	s := &Server{opts: opts, models: opts.Models, chunkSize: opts.ChunkSize, now: opts.Now}
	if len(s.models) == 0 {
		s.models = []string{DefaultModel}
	}
	if s.chunkSize <= 0 {
		s.chunkSize = DefaultChunkSize
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.scriptErr = s.SetScript(opts.Script)
	s.indent.Store(opts.Indent)
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		// The mock must not spend time on logging; connection errors are expected in
		// fault tests.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	s.http.SetKeepAlivesEnabled(true)
	return s
}

// SetScript installs script for the following requests; requests already being
// answered finish with the old one. Nil means the built-in echo answer. Sequence
// counters start afresh. On error the current script stays installed.
func (s *Server) SetScript(script *Script) error {
	cs, err := compileScript(script)
	if err != nil {
		return err
	}
	s.script.Store(cs)
	return nil
}

// SetIndent turns Options.Indent on or off for the following answers.
func (s *Server) SetIndent(on bool) { s.indent.Store(on) }

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves in the
// background until Close. It returns once the listener is open, so URL is valid.
// Call Start or Serve once per Server.
func (s *Server) Start(addr string) error {
	if s.scriptErr != nil {
		return s.scriptErr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mock upstream: listening on %s: %w", addr, err)
	}
	s.setListener(ln)
	go func() { _ = s.http.Serve(ln) }()
	return nil
}

// Serve serves on ln until Close or Shutdown, and then returns http.ErrServerClosed.
// It blocks; use Start for a background server.
func (s *Server) Serve(ln net.Listener) error {
	if s.scriptErr != nil {
		return s.scriptErr
	}
	s.setListener(ln)
	return s.http.Serve(ln)
}

func (s *Server) setListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listener = ln
	s.url = "http://" + ln.Addr().String() + "/v1"
}

// URL is the base URL of the OpenAI API, "http://HOST:PORT/v1", the value an OpenAI
// client's base URL takes. It is empty before Start or Serve.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Addr is the listening address "HOST:PORT", or empty before Start or Serve.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// Close stops the server at once, cutting open connections.
func (s *Server) Close() error {
	return s.http.Close()
}

// Shutdown stops accepting connections and waits for the requests being answered to
// finish, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}

// Recorded is one request the server answered (or failed to).
type Recorded struct {
	Method string
	// Path is the URL path, e.g. "/v1/chat/completions".
	Path string
	// Query is the raw query string, without "?".
	Query string
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the request body as received; empty when there was none.
	Body []byte
	// Rule names the script rule that answered a chat completion: the rule's name,
	// "rules[i]" for an unnamed one, "default" for the script's default answer, or
	// empty for other endpoints and requests rejected before matching.
	Rule     string
	Started  time.Time
	Finished time.Time
	// Cancelled says the client went away before the answer was complete.
	Cancelled bool
	// Status is the HTTP status sent; 0 when the connection was dropped before one.
	Status int
}

// Requests returns a copy of what was recorded since the last Reset, in the order the
// requests finished. It is empty when Options.Record is false.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.records...)
}

// Reset forgets the recorded requests and the stored Responses answers, restarts
// every rule's answer sequence and the id counters.
func (s *Server) Reset() {
	s.mu.Lock()
	s.records = nil
	s.stored, s.storedOrder = nil, nil
	s.finished.Store(0)
	s.started.Store(0)
	s.mu.Unlock()
	s.completionSeq.Store(0)
	s.responseSeq.Store(0)
	if cs := s.script.Load(); cs != nil {
		for i := range cs.rules {
			cs.rules[i].served.Store(0)
		}
	}
}

// ErrWaitTimeout is returned by WaitFor when fewer requests finished in time.
var ErrWaitTimeout = errors.New("mock upstream: timed out waiting for requests")

// WaitFor waits until at least n requests have finished since the last Reset (a
// cancelled or cut request counts once its handler is done) or timeout passes. It
// returns the recorded requests (empty when Options.Record is false), and
// ErrWaitTimeout, wrapped with the counts, when time ran out.
func (s *Server) WaitFor(n int, timeout time.Duration) ([]Recorded, error) {
	err := s.waitUntil(&s.finished, n, timeout, "finished")
	return s.Requests(), err
}

// WaitForStarted waits until at least n requests have reached the server since the
// last Reset, finished or not, or timeout passes (then ErrWaitTimeout, wrapped with
// the counts). Tests use it to act while a request is in flight at the upstream.
func (s *Server) WaitForStarted(n int, timeout time.Duration) error {
	return s.waitUntil(&s.started, n, timeout, "started")
}

// WaitIdle waits until every request that reached the server since the last
// Reset has finished (and is recorded, when Options.Record is set), or timeout
// passes (then ErrWaitTimeout, wrapped with the counts). A request is recorded
// once its answer is written, so a client can have its answer before the record
// exists: count the records after WaitIdle, not right after an answer.
func (s *Server) WaitIdle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		started := s.started.Load()
		if err := s.waitUntil(&s.finished, int(started), time.Until(deadline), "finished"); err != nil {
			return err
		}
		if s.started.Load() == started {
			return nil
		}
	}
}

// waitUntil waits until count reaches n or timeout passes.
func (s *Server) waitUntil(count *atomic.Int64, n int, timeout time.Duration, what string) error {
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if count.Load() >= int64(n) {
			s.mu.Unlock()
			return nil
		}
		if s.notify == nil {
			s.notify = make(chan struct{})
		}
		ch := s.notify
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("%w: %d of %d %s after %s", ErrWaitTimeout, count.Load(), n, what, timeout)
		}
	}
}

// count adds one to counter and wakes the waiters. When nobody waits it costs one
// atomic add: counter is incremented before waiters is read, and a waiter increments
// waiters before reading the counter, so one of the two always sees the other.
func (s *Server) count(counter *atomic.Int64) {
	counter.Add(1)
	if s.waiters.Load() == 0 {
		return
	}
	s.mu.Lock()
	s.wake()
	s.mu.Unlock()
}

// finish counts a finished request and records it when recording is on; without
// recording it costs what count costs.
func (s *Server) finish(rec *Recorded) {
	if !s.opts.Record {
		s.count(&s.finished)
		return
	}
	s.mu.Lock()
	s.records = append(s.records, *rec)
	s.finished.Add(1)
	s.wake()
	s.mu.Unlock()
}

// wake releases the waiters; s.mu is held.
func (s *Server) wake() {
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
}

// ServeHTTP routes a request: chat completions, models, echo; anything else is a 404
// with the OpenAI error envelope.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.count(&s.started)
	ex := exchange{w: w, r: r, indent: s.indent.Load()}
	defer ex.release()
	if s.opts.Record {
		ex.rec = &Recorded{
			Method:  r.Method,
			Path:    r.URL.Path,
			Query:   r.URL.RawQuery,
			Header:  r.Header.Clone(),
			Started: time.Now(),
		}
	}
	path := r.URL.Path
	switch {
	case path == "/v1/chat/completions":
		if r.Method != http.MethodPost {
			ex.writeError(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
				"", fmt.Sprintf("%s /v1/chat/completions is not supported; use POST", r.Method))
			break
		}
		s.serveChat(&ex)
	case path == "/v1/responses":
		if r.Method != http.MethodPost {
			ex.writeError(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
				"", fmt.Sprintf("%s /v1/responses is not supported; use POST", r.Method))
			break
		}
		s.serveResponses(&ex)
	case strings.HasPrefix(path, "/v1/responses/"):
		s.serveStoredResponse(&ex, strings.TrimPrefix(path, "/v1/responses/"))
	case path == "/v1/models" || strings.HasPrefix(path, "/v1/models/"):
		if ex.rec != nil {
			ex.rec.Body, _ = ex.readBody()
		}
		s.serveModels(&ex, strings.TrimPrefix(strings.TrimPrefix(path, "/v1/models"), "/"))
	case path == "/echo" || strings.HasPrefix(path, "/echo/"):
		s.serveEcho(&ex)
	default:
		if ex.rec != nil {
			ex.rec.Body, _ = ex.readBody()
		}
		ex.writeError(http.StatusNotFound, "invalid_request_error", "not_found", "",
			fmt.Sprintf("mock upstream: no endpoint %s %s", r.Method, path))
	}
	if ex.rec != nil {
		ex.rec.Finished = time.Now()
		ex.rec.Status = ex.status
		ex.rec.Cancelled = ex.cancelled
	}
	s.finish(ex.rec)
}

// exchange is one request being answered.
type exchange struct {
	w   http.ResponseWriter
	r   *http.Request
	rec *Recorded // nil when not recording

	status    int
	cancelled bool
	// indent: JSON bodies and event data are written indented (Options.Indent).
	indent bool
	// pooled are the buffers to return to bodyPool when the request is done.
	pooled []*[]byte
}

// wait sleeps d unless the client goes away first; it reports whether the client is
// still there.
func (ex *exchange) wait(d time.Duration) bool {
	ctx := ex.r.Context()
	if d <= 0 {
		if ctx.Err() != nil {
			ex.cancelled = true
			return false
		}
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		ex.cancelled = true
		return false
	}
}

// writeHeader sends the status once.
func (ex *exchange) writeHeader(status int) {
	ex.status = status
	ex.w.WriteHeader(status)
}

// write sends b and notes a client that went away.
func (ex *exchange) write(b []byte) bool {
	if _, err := ex.w.Write(b); err != nil {
		ex.cancelled = true
		return false
	}
	return true
}

// writeError sends the OpenAI error envelope. param and code may be empty (null).
func (ex *exchange) writeError(status int, typ, code, param, msg string) {
	ex.w.Header()["Content-Type"] = contentTypeJSON
	ex.writeHeader(status)
	ex.write(ex.jsonBody(appendErrorEnvelope(nil, typ, code, param, msg)))
}

// cut closes the connection abruptly after flushing what was written: the client sees
// a response that ends early.
func (ex *exchange) cut() {
	rc := http.NewResponseController(ex.w)
	if ex.status != 0 {
		// Flushing before a status would send an implicit 200.
		_ = rc.Flush()
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): panicking with ErrAbortHandler makes net/http
		// reset the stream, which is the same fault for the client.
		panic(http.ErrAbortHandler)
	}
	// A plain close (FIN, not RST) so the client reads everything sent before the cut
	// and then meets the end of the connection mid-response.
	_ = conn.Close()
}

var (
	contentTypeJSON = []string{"application/json"}
	contentTypeSSE  = []string{"text/event-stream; charset=utf-8"}
	noCache         = []string{"no-cache"}
)
