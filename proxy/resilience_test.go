package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestRetryHintReadsWhatProvidersSend(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		headers []string
		want    time.Duration
		hinted  bool
	}{
		{"none", nil, 0, false},
		{"Retry-After seconds", []string{"Retry-After", "7"}, 7 * time.Second, true},
		{"Retry-After HTTP date", []string{"Retry-After", "Sun, 01 Mar 2026 12:00:03 GMT"}, 3 * time.Second, true},
		{"Retry-After in the past", []string{"Retry-After", "Sun, 01 Mar 2026 11:00:00 GMT"}, 0, true},
		{"retry-after-ms wins", []string{"Retry-After", "7", "retry-after-ms", "1500"}, 1500 * time.Millisecond, true},
		{"OpenAI resets, requests spent", []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s", "x-ratelimit-remaining-tokens", "5000", "x-ratelimit-reset-tokens", "6m0s"}, time.Second, true},
		{"OpenAI resets, tokens spent", []string{"x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "20ms", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"}, 6 * time.Minute, true},
		{"OpenAI resets, neither says spent: the sooner", []string{"x-ratelimit-reset-requests", "12ms", "x-ratelimit-reset-tokens", "9ms"}, 9 * time.Millisecond, true},
		{"a reset in plain seconds", []string{"x-ratelimit-reset-tokens", "2"}, 2 * time.Second, true},
		{"garbage is no hint", []string{"Retry-After", "soon", "x-ratelimit-reset-requests", "later"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h fasthttp.ResponseHeader
			for i := 0; i+1 < len(tc.headers); i += 2 {
				h.Set(tc.headers[i], tc.headers[i+1])
			}
			got, hinted := retryHint(&h, now)
			if got != tc.want || hinted != tc.hinted {
				t.Errorf("retryHint = %s, %v; want %s, %v", got, hinted, tc.want, tc.hinted)
			}
		})
	}
}

func TestRetryWaitsStayWithinTheirBounds(t *testing.T) {
	t.Parallel()
	p := retryPolicy{maxRetries: 2, base: 250 * time.Millisecond, max: 8 * time.Second}
	for n := range 8 {
		ceiling := min(p.base<<n, p.max)
		for range 200 {
			if d, ok := p.wait(n, 0, false); !ok || d < 0 || d > ceiling {
				t.Fatalf("backoff %d = %s, want within [0, %s]", n, d, ceiling)
			}
		}
	}
	if d, ok := p.wait(0, 2*time.Second, true); !ok || d < 2*time.Second || d > 2*time.Second+p.base {
		t.Errorf("a 2s hint waits %s", d)
	}
	if _, ok := p.wait(0, 9*time.Second, true); ok {
		t.Error("a hint beyond max_delay must not be waited for")
	}
}

func TestTheBreakerOpensAfterConsecutiveFailuresAndProbesOnce(t *testing.T) {
	t.Parallel()
	var changes []string
	b := &breaker{threshold: 3, cooldown: 10 * time.Second, changed: func(open bool, _ int) {
		changes = append(changes, map[bool]string{true: "open", false: "closed"}[open])
	}}
	now := time.Unix(1_700_000_000, 0)
	fail := func() {
		ok, probe, _ := b.admit(now)
		if !ok {
			t.Fatal("a closed breaker refused a call")
		}
		b.record(probe, verdictFailure, now)
	}
	fail()
	fail()
	b.record(false, verdictSuccess, now) // a success in between resets the count
	fail()
	fail()
	if ok, _, _ := b.admit(now); !ok {
		t.Fatal("opened after 2 consecutive failures, threshold 3")
	}
	fail()
	if ok, _, retryIn := b.admit(now.Add(time.Second)); ok || retryIn != 9*time.Second {
		t.Fatalf("after 3 consecutive failures: admit %v, retry in %s; want refused for 9s more", ok, retryIn)
	}
	later := now.Add(11 * time.Second)
	ok, probe, _ := b.admit(later)
	if !ok || !probe {
		t.Fatal("after the cooldown one probe must go")
	}
	if ok, _, _ := b.admit(later); ok {
		t.Fatal("a second call went while the probe was in flight")
	}
	b.record(true, verdictFailure, later)
	if ok, _, retryIn := b.admit(later); ok || retryIn != 10*time.Second {
		t.Fatalf("a failed probe must open the circuit for another cooldown: %v %s", ok, retryIn)
	}
	evenLater := later.Add(11 * time.Second)
	ok, probe, _ = b.admit(evenLater)
	if !ok || !probe {
		t.Fatal("no second probe")
	}
	b.record(true, verdictNone, evenLater) // cancelled: says nothing, frees the probe
	ok, probe, _ = b.admit(evenLater)
	if !ok || !probe {
		t.Fatal("a cancelled probe must let another probe go")
	}
	b.record(true, verdictSuccess, evenLater)
	if ok, probe, _ := b.admit(evenLater); !ok || probe {
		t.Fatal("a successful probe must close the circuit")
	}
	if got := strings.Join(changes, " "); got != "open closed" {
		t.Errorf("changes reported: %q, want open then closed (a failed probe re-opens an open circuit: no change)", got)
	}
	off := &breaker{threshold: 0}
	for range 10 {
		off.record(false, verdictFailure, now)
	}
	if ok, _, _ := off.admit(now); !ok {
		t.Error("failures: 0 turns the breaker off")
	}
}

func TestAKeyPoolPicksByWeightAndLeavesCoolingKeysOut(t *testing.T) {
	t.Parallel()
	heavy, light := &poolKey{env: "K1", value: "k1", weight: 3}, &poolKey{env: "K2", value: "k2", weight: 1}
	p := &keyPool{keys: []*poolKey{heavy, light}}
	now := time.Unix(1_700_000_000, 0)
	picks := map[string]int{}
	for range 4000 {
		k, _ := p.pick(now, 0)
		picks[k.env]++
	}
	if picks["K1"] < 2700 || picks["K1"] > 3300 {
		t.Errorf("weights 3:1 picked %v", picks)
	}
	if !p.cool(heavy, now, 30*time.Second) {
		t.Fatal("a key of a pool of two did not cool")
	}
	for range 100 {
		if k, _ := p.pick(now.Add(29*time.Second), 0); k != light {
			t.Fatal("a cooling key was picked")
		}
	}
	if k, _ := p.pick(now, 1<<1); k != nil {
		t.Fatalf("with one key cooling and the other tried, pick gave %s", k.env)
	}
	if d := p.readyIn(now, 1<<1); d != 30*time.Second {
		t.Errorf("readyIn = %s, want the cooling key's 30s", d)
	}
	if k, _ := p.pick(now.Add(30*time.Second), 0); k == nil {
		t.Error("a key whose cooldown ended is not picked again")
	}
	single := &keyPool{keys: []*poolKey{{env: "K", value: "k", weight: 1}}}
	if single.cool(single.keys[0], now, time.Minute) {
		t.Error("a pool of one key must never cool: there is nothing else to carry on with")
	}
}

func TestResilienceConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	const up = "upstreams: {a: {base_url: 'http://x/v1'}, b: {base_url: 'http://y/v1'}}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"upstream and upstreams", up + "routes: [{name: r, default: true, upstream: a, upstreams: [b]}]", "set upstream or upstreams, not both"},
		{"route upstream_model with upstreams", up + "routes: [{name: r, default: true, upstream_model: m, upstreams: [a, b]}]", "set upstream_model on each entry"},
		{"unknown upstream in the list", up + "routes: [{name: r, default: true, upstreams: [a, c]}]", `upstreams[1]: no upstream named "c"`},
		{"an upstream listed twice", up + "routes: [{name: r, default: true, upstreams: [a, a]}]", `"a" is listed twice`},
		{"unknown key in an entry", up + "routes: [{name: r, default: true, upstreams: [{name: a, model: m}]}]", "routes[0] (r).upstreams[0] (a).model: unknown key (did you mean upstream_model?)"},
		{"an entry that is a list", up + "routes: [{name: r, default: true, upstreams: [[a]]}]", "a route's upstream is an upstream name or {name, upstream_model}"},
		{"api_key_env and api_key_envs", "upstreams: {a: {base_url: 'http://x/v1', api_key_env: FACTGATE_A, api_key_envs: [FACTGATE_B]}}\nroutes: [{name: r, default: true, upstream: a}]", "not both"},
		{"a pool key outside FACTGATE_", "upstreams: {a: {base_url: 'http://x/v1', api_key_envs: [{env: OPENAI_KEY, weight: 2}]}}\nroutes: [{name: r, default: true, upstream: a}]", "api_key_envs[0]"},
		{"a negative weight", "upstreams: {a: {base_url: 'http://x/v1', api_key_envs: [{env: FACTGATE_A, weight: -1}]}}\nroutes: [{name: r, default: true, upstream: a}]", "weight: -1"},
		{"too many retries", "upstreams: {a: {base_url: 'http://x/v1', retry: {max_retries: 50}}}\nroutes: [{name: r, default: true, upstream: a}]", "max_retries: 50"},
		{"max_delay under base_delay", "upstreams: {a: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: a, retry: {base_delay: 2s, max_delay: 1s}}]", "routes[0] (r).retry.max_delay"},
		{"a negative breaker", "upstreams: {a: {base_url: 'http://x/v1', breaker: {failures: -1}}}\nroutes: [{name: r, default: true, upstream: a}]", "breaker.failures"},
		{"rate limits without keys", "auth: {rate_limit: {requests_per_minute: 10}}\nupstreams: {a: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: a}]", "need auth.mode: keys"},
		{"fallbacks of two dialects", "upstreams: {a: {base_url: 'http://x/v1'}, b: {base_url: 'http://y/v1', api: responses}}\nroutes: [{name: r, default: true, upstreams: [a, b]}]", `upstreams[1]: upstream "b" speaks api responses but the route's first upstream speaks chat`},
		{"a negative rate limit", "auth: {mode: keys, keys: [{name: k, key_env: FACTGATE_K, rate_limit: {tokens_per_minute: -5}}]}\nupstreams: {a: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: a}]", "auth.keys[0].rate_limit.tokens_per_minute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(tc.yaml), "test.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	cfg, err := ParseConfig([]byte(up+"routes: [{name: r, default: true, upstreams: [a, {name: b, upstream_model: m}], retry: {max_retries: 0}}]"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Routes[0].UpstreamList(); len(got) != 2 || got[0] != (RouteUpstream{Name: "a"}) || got[1] != (RouteUpstream{Name: "b", UpstreamModel: "m"}) {
		t.Errorf("UpstreamList = %+v", got)
	}
	if p := cfg.Upstreams["a"].Retry.policy(cfg.Routes[0].Retry); p.maxRetries != 0 || p.base != DefaultRetryBaseDelay || p.max != DefaultRetryMaxDelay {
		t.Errorf("a route's retry block overrides only what it sets: %+v", p)
	}
}
