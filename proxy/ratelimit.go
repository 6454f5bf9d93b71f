package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
)

// rateLimiter enforces the client keys' requests and tokens per minute
// (auth.rate_limit, auth.keys[].rate_limit), for every replica sharing the cache.
//
// Each key has a fixed one-minute window, one counter hash in the cache per key
// and minute: a request adds one to its requests and reads the window in one
// atomic step (Redis: HINCRBY and HGETALL in one MULTI), so replicas count
// together; the tokens of each answer (usage.total_tokens, hidden calls included)
// are added when it is known. A request is refused when the window's requests are
// over the limit, or its tokens already spent.
//
// It fails open: without Redis, or while Redis fails, the cache's memory tier
// counts, so each replica still limits what it serves itself. A fixed window lets
// a client send up to twice its limit across a minute boundary; it is what the
// counters can do in one round trip, and what the reset headers describe.
//
// The check runs before routing, for chat completions and every pass-through
// path alike (a chain stage would miss the pass-through ones).
type rateLimiter struct {
	cache   cache.Cache
	limits  map[string]clientLimit // by client key name; absent: no limit
	now     func() time.Time
	metrics *metrics
	log     *slog.Logger

	mu sync.Mutex
	// completion is each limited client's running average of the tokens its
	// answers used beyond their prompt's estimate, on this replica: what a
	// request without max_tokens reserves for its answer.
	completion map[string]float64
}

// clientLimit is one key's limits; 0 means none.
type clientLimit struct{ requests, tokens int64 }

// rateWindow is a request's view of its client's current window.
type rateWindow struct {
	l        *rateLimiter
	client   string
	key      string // the window's counter hash
	limit    clientLimit
	requests int64 // counted in the window, this request included
	tokens   int64 // spent (or reserved) in the window before this request
	reset    time.Duration
	// est is the request's token estimate, reserved in the window when it was
	// admitted; prompt is its prompt's part.
	est    tokenEstimate
	settle sync.Once
}

// tokenEstimate is what a request is expected to spend: its prompt (its body at
// four bytes a token) and its answer (max_tokens when it says, else the
// client's running average).
type tokenEstimate struct{ prompt, completion int64 }

func (e tokenEstimate) total() int64 { return e.prompt + e.completion }

// rateWindowValue is the request's user value holding its *rateWindow.
const rateWindowValue = "factgate.rate_window"

// Counter fields of a window's hash.
const (
	windowRequests = "requests"
	windowTokens   = "tokens"
)

// windowTTL keeps a window's counters a little past its end.
const windowTTL = 2 * rateLimitWindow

// newRateLimiter returns nil when no key has a limit.
func newRateLimiter(cfg *Config, c cache.Cache, m *metrics, log *slog.Logger, now func() time.Time) *rateLimiter {
	limits := map[string]clientLimit{}
	for _, k := range cfg.Auth.Keys {
		rl := cfg.Auth.RateLimit.over(k.RateLimit)
		var lim clientLimit
		if rl.RequestsPerMinute != nil {
			lim.requests = *rl.RequestsPerMinute
		}
		if rl.TokensPerMinute != nil {
			lim.tokens = *rl.TokensPerMinute
		}
		if lim.requests > 0 || lim.tokens > 0 {
			limits[k.Name] = lim
		}
	}
	if len(limits) == 0 {
		return nil
	}
	return &rateLimiter{cache: c, limits: limits, now: now, metrics: m, log: log}
}

// admit counts a request of client and returns its window, or the 429 when the
// window is spent. A client without limits gets neither. With a token limit the
// request's estimate is reserved in the same atomic step, so that concurrent
// requests see each other's before any answer is counted; spend settles it.
// body is the request's (nil when it has none).
func (l *rateLimiter) admit(client string, body []byte) (*rateWindow, *interceptors.Error) {
	if l == nil {
		return nil, nil
	}
	lim, ok := l.limits[client]
	if !ok {
		return nil, nil
	}
	now := l.now()
	start := now.Truncate(rateLimitWindow)
	w := &rateWindow{
		l: l, client: client, limit: lim,
		key:   "ratelimit:" + cache.HashTag(client) + ":" + strconv.FormatInt(start.Unix(), 10),
		reset: start.Add(rateLimitWindow).Sub(now),
	}
	deltas := map[string]int64{windowRequests: 1}
	if lim.tokens > 0 {
		w.est = l.estimate(client, body)
		if w.est.total() > 0 {
			deltas[windowTokens] = w.est.total()
		}
	}
	// The Redis client's own timeouts (cache.redis.read_timeout) bound the call;
	// once Redis fails, the cache answers from memory without asking it.
	counters, err := l.cache.HashIncrGetAll(context.Background(), w.key, deltas, windowTTL)
	if err != nil {
		// Failing open: the request is not counted rather than refused.
		l.log.Warn("rate limit: counting the request failed; admitting it", "client", client, "error", err)
		w.est = tokenEstimate{}
		return w, nil
	}
	w.requests, w.tokens = counters[windowRequests], counters[windowTokens]-w.est.total()
	wait := (w.reset + time.Millisecond - 1).Truncate(time.Millisecond)
	switch {
	case lim.requests > 0 && w.requests > lim.requests:
		l.metrics.rateLimited.WithLabelValues(client, "requests").Inc()
		w.spend(0) // a refused request spends nothing: its reservation goes
		return w, &interceptors.Error{Status: fasthttp.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("Rate limit reached for client %s on requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %s.",
				client, lim.requests, lim.requests, wait)}
	case lim.tokens > 0 && w.tokens >= lim.tokens:
		l.metrics.rateLimited.WithLabelValues(client, "tokens").Inc()
		w.spend(0)
		return w, &interceptors.Error{Status: fasthttp.StatusTooManyRequests, Type: "tokens", Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("Rate limit reached for client %s on tokens per min (TPM): Limit %d, Used %d. Please try again in %s.",
				client, lim.tokens, w.tokens, wait)}
	}
	return w, nil
}

// maxTokenFields name the answer's bound in a chat completion, a legacy
// completion and a Responses request.
var maxTokenFields = [...]string{"max_completion_tokens", "max_tokens", "max_output_tokens"}

// estimate is what a request of client is expected to spend (tokenEstimate).
func (l *rateLimiter) estimate(client string, body []byte) tokenEstimate {
	if len(body) == 0 {
		return tokenEstimate{}
	}
	e := tokenEstimate{prompt: int64(len(body)+3) / 4}
	// One pass over the top level (the body may be megabytes), the first field
	// of maxTokenFields' order winning.
	rank := len(maxTokenFields)
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		for i, f := range maxTokenFields[:rank] {
			if k.Str == f && v.Type == gjson.Number && v.Int() > 0 {
				rank, e.completion = i, v.Int()
			}
		}
		return rank > 0
	})
	if rank < len(maxTokenFields) {
		return e
	}
	l.mu.Lock()
	e.completion = int64(l.completion[client] + 0.5)
	l.mu.Unlock()
	return e
}

// learn folds an answer's tokens beyond its prompt's estimate into client's
// running average (a quarter of the weight to the newest answer).
func (l *rateLimiter) learn(client string, beyondPrompt int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.completion == nil {
		l.completion = map[string]float64{}
	}
	avg, seen := l.completion[client]
	if !seen {
		l.completion[client] = float64(beyondPrompt)
		return
	}
	l.completion[client] = avg + (float64(beyondPrompt)-avg)/4
}

// spend settles the request's reservation with the tokens its answer used (0
// when it used none, failed, or its usage is unknown): the window gets the
// difference. Only the first call counts; every request is settled once —
// by its answer's usage, or at its end (settleTokens).
func (w *rateWindow) spend(tokens int) {
	if w == nil || w.limit.tokens == 0 {
		return
	}
	w.settle.Do(func() {
		if tokens > 0 && w.est.prompt > 0 {
			w.l.learn(w.client, max(int64(tokens)-w.est.prompt, 0))
		}
		delta := int64(max(tokens, 0)) - w.est.total()
		if delta == 0 {
			return
		}
		if err := w.l.cache.HashIncr(context.Background(), w.key, map[string]int64{windowTokens: delta}, windowTTL); err != nil {
			w.l.log.Warn("rate limit: counting an answer's tokens failed", "client", w.client, "tokens", tokens, "error", err)
		}
	})
}

// rateLimitHeaders are the provider's rate limit headers; with a client limit
// they describe the client's own, and the upstream's (its key's quota, shared
// by every client) do not reach the client.
var rateLimitHeaders = [...]string{
	"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
	"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
}

// isRateLimitHeader reports one of rateLimitHeaders, in any case.
func isRateLimitHeader(name string) bool {
	for _, h := range rateLimitHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// setHeaders writes the window's state as OpenAI does: limit, remaining, and the
// time until it resets ("1s", "6m0s", "20ms").
func (w *rateWindow) setHeaders(h *fasthttp.ResponseHeader) {
	for _, name := range rateLimitHeaders {
		h.Del(name)
	}
	reset := formatReset(w.reset)
	if w.limit.requests > 0 {
		h.Set("x-ratelimit-limit-requests", strconv.FormatInt(w.limit.requests, 10))
		h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(max(w.limit.requests-w.requests, 0), 10))
		h.Set("x-ratelimit-reset-requests", reset)
	}
	if w.limit.tokens > 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(w.limit.tokens, 10))
		h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(max(w.limit.tokens-w.tokens, 0), 10))
		h.Set("x-ratelimit-reset-tokens", reset)
	}
}

// formatReset renders a wait as OpenAI's reset headers do, rounded up to the
// millisecond: "20ms", "1.5s", "6m0s".
func formatReset(d time.Duration) string {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond).String()
}

// checkRateLimit counts the request of client against its limits and keeps its
// window for the answer's headers and tokens. It reports false when the request
// was refused (the 429 is written).
func (s *Server) checkRateLimit(rc *fasthttp.RequestCtx, client string, start time.Time) bool {
	var body []byte
	if string(rc.Path()) != checkPath {
		body = rc.PostBody() // a check spends no tokens
	}
	w, e := s.limiter.admit(client, body)
	if w == nil {
		return true
	}
	rc.SetUserValue(rateWindowValue, w)
	if e == nil {
		return true
	}
	s.fail(rc, s.passMetrics, start, e)
	rc.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(w.reset)))
	w.setHeaders(&rc.Response.Header)
	return false
}

func rateWindowOf(rc *fasthttp.RequestCtx) *rateWindow {
	w, _ := rc.UserValue(rateWindowValue).(*rateWindow)
	return w
}

// setRateLimitHeaders adds the client's rate limit headers to the answer.
func (s *Server) setRateLimitHeaders(rc *fasthttp.RequestCtx) {
	if w := rateWindowOf(rc); w != nil {
		w.setHeaders(&rc.Response.Header)
	}
}

// countsTokens reports whether the request's client has a token limit, so the
// answer's usage must be read.
func (s *Server) countsTokens(rc *fasthttp.RequestCtx) bool {
	w := rateWindowOf(rc)
	return w != nil && w.limit.tokens > 0
}

// spendTokens adds an answer's tokens to its client's window.
func (s *Server) spendTokens(rc *fasthttp.RequestCtx, tokens int) {
	rateWindowOf(rc).spend(tokens)
}

// settleTokens ends a request's reservation when the handler returns without
// an answer that spends it (an error before or at the upstream); an answer
// still being written (a stream) settles at its end instead.
func (s *Server) settleTokens(rc *fasthttp.RequestCtx) {
	if !rc.Response.IsBodyStream() {
		rateWindowOf(rc).spend(0)
	}
}

// answerTokens reads usage.total_tokens of an answer read whole (uncompressing
// it when the upstream compressed it); 0 when it has none.
func answerTokens(resp *fasthttp.Response) int {
	body := resp.Body()
	if len(resp.Header.ContentEncoding()) > 0 {
		b, err := resp.BodyUncompressed()
		if err != nil {
			return 0
		}
		body = b
	}
	return int(gjson.GetBytes(body, "usage.total_tokens").Int())
}

// usageScanner finds the usage of a streamed answer: the first data event that
// carries usage.total_tokens (OpenAI sends it with stream_options.include_usage;
// without it a stream tells no usage, and is not counted), or, in a Responses API
// stream, the terminal event's response.usage.total_tokens. It spends the tokens
// as it reads the event, before the client gets it: a client that reads the
// whole answer and asks again is counted with it.
type usageScanner struct {
	spend func(tokens int)
	line  []byte
	done  bool
	// skipping: the current line outgrew maxUsageLine and is not kept whole.
	skipping bool
	// terminal: the skipped line is a Responses terminal event, whose response
	// echoes the output and the instructions before its usage; tail keeps the
	// line's last usageTail bytes, where the usage is.
	terminal bool
	tail     []byte
}

// maxUsageLine bounds the event line kept while it arrives: a usage chunk is
// small, a content event that outgrows it is skipped.
const maxUsageLine = 64 << 10

// usageTail is how much of the end of an over-long Responses terminal event is
// kept: its usage object and the few fields after it.
const usageTail = 4 << 10

func (u *usageScanner) scan(p []byte) {
	for len(p) > 0 && !u.done {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		switch {
		case !u.skipping && len(u.line)+len(part) > maxUsageLine:
			head := u.line
			if len(head) < 256 {
				head = append(head, part[:min(len(part), 256-len(head))]...)
			}
			u.skipping, u.terminal = true, responsesTerminal(head)
			if u.terminal {
				u.tail = keepTail(append(u.tail[:0], u.line...), part)
			}
			u.line = u.line[:0]
		case !u.skipping:
			u.line = append(u.line, part...)
		case u.terminal:
			u.tail = keepTail(u.tail, part)
		}
		if i < 0 {
			return
		}
		if !u.skipping {
			u.readLine(u.line)
		} else if u.terminal {
			u.readTail(u.tail)
		}
		u.line, u.skipping, u.terminal, u.tail = u.line[:0], false, false, u.tail[:0]
		p = p[i+1:]
	}
}

// keepTail appends p to tail and keeps its last usageTail bytes.
func keepTail(tail, p []byte) []byte {
	if len(p) >= usageTail {
		return append(tail[:0], p[len(p)-usageTail:]...)
	}
	tail = append(tail, p...)
	if over := len(tail) - usageTail; over > 0 {
		tail = append(tail[:0], tail[over:]...)
	}
	return tail
}

func (u *usageScanner) readLine(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"total_tokens"`)) {
		return
	}
	n := gjson.GetBytes(data, "usage.total_tokens")
	if !n.Exists() && responsesTerminal(line) {
		n = gjson.GetBytes(data, "response.usage.total_tokens")
	}
	if n.Exists() {
		u.done = true
		u.spend(int(n.Int()))
	}
}

// readTail reads the total_tokens at the end of an over-long Responses terminal
// event: the last "total_tokens": followed by a number (a string that mentions
// it is escaped, \"total_tokens\", and never matches).
func (u *usageScanner) readTail(tail []byte) {
	key := []byte(`"total_tokens":`)
	for i := bytes.LastIndex(tail, key); i >= 0; i = bytes.LastIndex(tail[:i], key) {
		rest := tail[i+len(key):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if n, err := strconv.Atoi(string(rest[:j])); err == nil && j > 0 {
			u.done = true
			u.spend(n)
			return
		}
	}
}

// responsesTerminal reports whether an SSE data line (or its beginning) is a
// Responses API stream's terminal event, which carries the usage in its
// response: response.completed, response.incomplete or response.failed.
func responsesTerminal(line []byte) bool {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return false
	}
	head := data[:min(len(data), 256)]
	for _, t := range [...]string{`"response.completed"`, `"response.incomplete"`, `"response.failed"`} {
		if bytes.Contains(head, []byte(t)) {
			return true
		}
	}
	return false
}
