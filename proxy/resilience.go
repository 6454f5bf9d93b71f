package proxy

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Provider resilience (issue 15): an upstream's circuit breaker, its key pool, and
// the waits between retries. The retry and fallback loop itself is send
// (dispatch.go).

// breaker is an upstream's circuit breaker. Closed, it counts consecutive failed
// calls; at threshold it opens: no call goes to the upstream for cooldown. Then it
// admits exactly one call, the probe, whose outcome closes it or opens it for
// another cooldown. A nil breaker, or one with threshold 0, admits every call.
type breaker struct {
	threshold int
	cooldown  time.Duration
	// changed is told when the circuit opens (true) or closes (false).
	changed func(open bool, failures int)

	mu        sync.Mutex
	failures  int
	openUntil time.Time // zero: closed
	probing   bool
}

// breakerVerdict is what a call says about its upstream's health.
type breakerVerdict int8

const (
	verdictNone    breakerVerdict = iota // says nothing (cancelled, saturated by us)
	verdictSuccess                       // the upstream answered
	verdictFailure                       // it did not, or failed (5xx, timeout, broken)
)

// admit reports whether a call may go to the upstream now. probe is set for the
// one call that tests an open circuit after its cooldown: its outcome must be
// recorded. retryIn is how long an open circuit stays open (0 while a probe is
// in flight).
func (b *breaker) admit(now time.Time) (ok, probe bool, retryIn time.Duration) {
	if b == nil || b.threshold <= 0 {
		return true, false, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return true, false, 0
	case now.Before(b.openUntil):
		return false, false, b.openUntil.Sub(now)
	case b.probing:
		return false, false, 0
	}
	b.probing = true
	return true, true, 0
}

// record notes how an admitted call ended. Any success closes the circuit; the
// threshold-th consecutive failure, or a failed probe, opens it.
func (b *breaker) record(probe bool, v breakerVerdict, now time.Time) {
	if b == nil || b.threshold <= 0 {
		return
	}
	b.mu.Lock()
	if probe {
		b.probing = false
	}
	var opened, closed bool
	failures := 0
	switch v {
	case verdictSuccess:
		closed = !b.openUntil.IsZero()
		b.failures, b.openUntil = 0, time.Time{}
	case verdictFailure:
		b.failures++
		failures = b.failures
		if probe || (b.openUntil.IsZero() && b.failures >= b.threshold) {
			opened = b.openUntil.IsZero()
			b.openUntil = now.Add(b.cooldown)
		}
	}
	b.mu.Unlock()
	if b.changed != nil && (opened || closed) {
		b.changed(opened, failures)
	}
}

// poolKey is one provider key of an upstream.
type poolKey struct {
	env    string // the environment variable: how logs, traces and metrics name the key
	value  string
	weight int
	// coolUntil is when (Unix ns) the key may be used again; 0: now.
	coolUntil atomic.Int64
}

// keyPool is an upstream's provider keys. Calls pick a key at random by weight
// among those not cooling down. A key cools down only in a pool of two or more:
// with one key there is nothing else to carry on with, and the retry waits (the
// provider's Retry-After) do the same job per request.
type keyPool struct {
	keys []*poolKey
}

// maxPoolKeys bounds a pool so that the keys a request tried fit one bitmask.
const maxPoolKeys = 64

func (p *keyPool) size() int {
	if p == nil {
		return 0
	}
	return len(p.keys)
}

// pick returns a key to use: at random by weight among the keys that are neither
// cooling down nor in tried (a bitmask of indexes); nil when none is left. A pool of
// one key always returns it.
func (p *keyPool) pick(now time.Time, tried uint64) (*poolKey, int) {
	switch len(p.keys) {
	case 0:
		return nil, -1
	case 1:
		return p.keys[0], 0
	}
	t := now.UnixNano()
	total := 0
	for i, k := range p.keys {
		if tried&(1<<i) == 0 && k.coolUntil.Load() <= t {
			total += k.weight
		}
	}
	if total == 0 {
		return nil, -1
	}
	r := rand.IntN(total)
	for i, k := range p.keys {
		if tried&(1<<i) != 0 || k.coolUntil.Load() > t {
			continue
		}
		if r < k.weight {
			return k, i
		}
		r -= k.weight
	}
	return nil, -1
}

// cool leaves k out for d; it reports whether it did (a pool of one never cools).
func (p *keyPool) cool(k *poolKey, now time.Time, d time.Duration) bool {
	if len(p.keys) < 2 || d <= 0 {
		return false
	}
	until := now.Add(d).UnixNano()
	for {
		cur := k.coolUntil.Load()
		if cur >= until || k.coolUntil.CompareAndSwap(cur, until) {
			return true
		}
	}
}

// readyIn is how long until the first key not in tried stops cooling down (0 when
// one is ready now, or when every key was tried).
func (p *keyPool) readyIn(now time.Time, tried uint64) time.Duration {
	t := now.UnixNano()
	best := int64(-1)
	for i, k := range p.keys {
		if tried&(1<<i) != 0 {
			continue
		}
		wait := max(k.coolUntil.Load()-t, 0)
		if best < 0 || wait < best {
			best = wait
		}
	}
	return time.Duration(max(best, 0))
}

// backoff is the wait before retry n (0 for the first retry): a random time up to
// base·2ⁿ, capped at max ("full jitter": retries of many clients spread out
// instead of arriving together).
func (p retryPolicy) backoff(n int) time.Duration {
	ceiling := p.max
	if n < 32 {
		if step := p.base << n; step > 0 && step < ceiling {
			ceiling = step
		}
	}
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

// wait is how long to wait before retry n when the provider asked for hint (hinted):
// the hint with up to a tenth of it added (at most base), so that the replicas it
// refused together do not come back together; without a hint, the backoff. ok is
// false when the provider asks for longer than max.
func (p retryPolicy) wait(n int, hint time.Duration, hinted bool) (d time.Duration, ok bool) {
	if !hinted {
		return p.backoff(n), true
	}
	if hint > p.max {
		return 0, false
	}
	if j := min(hint/retryHintJitterFraction, p.base); j > 0 {
		hint += rand.N(j)
	}
	return min(hint, p.max), true
}

// retryHint reads how long the provider asks to be left alone: retry-after-ms
// (OpenAI's, in milliseconds), Retry-After (seconds or an HTTP date), else the
// x-ratelimit-reset-requests / -tokens durations ("1s", "6m0s", "20ms") — of the
// limit whose x-ratelimit-remaining-* is 0, or the sooner of the two.
func retryHint(h *fasthttp.ResponseHeader, now time.Time) (time.Duration, bool) {
	if v := h.Peek("retry-after-ms"); len(v) > 0 {
		if ms, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := bytes.TrimSpace(h.Peek("Retry-After")); len(v) > 0 {
		if secs, err := strconv.ParseFloat(string(v), 64); err == nil && secs >= 0 && secs < 1e9 {
			return time.Duration(secs * float64(time.Second)), true
		}
		if t, err := fasthttp.ParseHTTPDate(v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	req, okReq := parseReset(h.Peek("x-ratelimit-reset-requests"))
	tok, okTok := parseReset(h.Peek("x-ratelimit-reset-tokens"))
	outReq := okReq && string(bytes.TrimSpace(h.Peek("x-ratelimit-remaining-requests"))) == "0"
	outTok := okTok && string(bytes.TrimSpace(h.Peek("x-ratelimit-remaining-tokens"))) == "0"
	switch {
	case outReq && outTok:
		return max(req, tok), true
	case outReq:
		return req, true
	case outTok:
		return tok, true
	case okReq && okTok:
		return min(req, tok), true
	case okReq:
		return req, true
	case okTok:
		return tok, true
	}
	return 0, false
}

// parseReset reads an x-ratelimit-reset-* value: a Go-style duration as OpenAI
// sends it ("1s", "6m0s", "20ms") or a number of seconds.
func parseReset(v []byte) (time.Duration, bool) {
	s := string(bytes.TrimSpace(v))
	if s == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, true
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs >= 0 && secs < 1e9 {
		return time.Duration(secs * float64(time.Second)), true
	}
	return 0, false
}
