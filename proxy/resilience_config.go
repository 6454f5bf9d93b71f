package proxy

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/configs/units"
)

// Defaults of the provider-resilience settings (issue 15).
const (
	DefaultMaxRetries       = 2
	DefaultRetryBaseDelay   = 250 * time.Millisecond
	DefaultRetryMaxDelay    = 8 * time.Second
	DefaultBreakerFailures  = 5
	DefaultBreakerCooldown  = 30 * time.Second
	DefaultKeyCooldown      = 60 * time.Second
	maxRetriesLimit         = 10
	rateLimitWindow         = time.Minute
	maxAPIKeyWeight         = 1000
	defaultAPIKeyWeight     = 1
	retryHintJitterFraction = 10 // a provider's wait gets up to 1/10 of it added
)

// RetryConfig says how a failed upstream call is tried again on the same upstream.
// Only failures where the provider did no billable work are retried: a refused or
// failed connection, and 429, 502, 503 and 504 answers (before the proxy sent any
// byte of the answer to the client). Nil and zero fields take the defaults.
type RetryConfig struct {
	// MaxRetries is how many more times a failed call is sent to the same upstream
	// before the route's next upstream is tried. Nil means 2; 0 turns retries off.
	MaxRetries *int `yaml:"max_retries"`
	// BaseDelay is the first backoff step: the n-th retry waits a random time
	// between 0 and BaseDelay·2ⁿ (full jitter), at most MaxDelay. Default 250ms.
	BaseDelay units.Duration `yaml:"base_delay"`
	// MaxDelay caps every wait. A provider that asks for a longer wait
	// (Retry-After, retry-after-ms, x-ratelimit-reset-*) is not retried: the next
	// upstream answers, or the client gets the provider's answer. Default 8s.
	MaxDelay units.Duration `yaml:"max_delay"`
}

// BreakerConfig is an upstream's circuit breaker: after Failures consecutive failed
// calls (a connection that fails, a timeout, a broken answer, a 5xx) the upstream
// gets no calls for Cooldown; then one call probes it, and its outcome closes the
// circuit or opens it for another cooldown. A 429 is not a failure: the provider
// works and says when to come back. Nil and zero fields take the defaults.
type BreakerConfig struct {
	// Failures opens the circuit after this many consecutive failures. Nil means
	// 5; 0 turns the breaker off.
	Failures *int `yaml:"failures"`
	// Cooldown is how long an open circuit sends nothing. Default 30s.
	Cooldown units.Duration `yaml:"cooldown"`
}

// APIKeyRef is one key of an upstream's key pool: the environment variable that
// holds it and its weight. In YAML a bare name is a key of weight 1:
//
//	api_key_envs: [{env: FACTGATE_OPENAI_KEY_1, weight: 2}, FACTGATE_OPENAI_KEY_2]
type APIKeyRef struct {
	// Env names the environment variable holding the key (FACTGATE_*).
	Env string `yaml:"env"`
	// Weight is the key's share of the calls among the keys that are not cooling
	// down. Zero means 1.
	Weight int `yaml:"weight"`
}

// UnmarshalYAML reads a bare environment variable name or {env, weight}.
func (k *APIKeyRef) UnmarshalYAML(node *yaml.Node) error {
	type plain APIKeyRef
	return nameOrMapping(node, &k.Env, (*plain)(k), "an api key is an environment variable name or {env, weight}", "env", "weight")
}

// RouteUpstream is one upstream of a route's ordered list: its name and the model
// it gets. In YAML a bare name is an upstream without a model of its own:
//
//	upstreams: [{name: deepseek, upstream_model: deepseek-chat}, {name: openai, upstream_model: gpt-4o-mini}]
type RouteUpstream struct {
	// Name is an entry of upstreams.
	Name string `yaml:"name"`
	// UpstreamModel replaces the request's model on this upstream. Empty keeps the
	// client's model.
	UpstreamModel string `yaml:"upstream_model"`
}

// UnmarshalYAML reads a bare upstream name or {name, upstream_model}.
func (r *RouteUpstream) UnmarshalYAML(node *yaml.Node) error {
	type plain RouteUpstream
	return nameOrMapping(node, &r.Name, (*plain)(r), "a route's upstream is an upstream name or {name, upstream_model}", "name", "upstream_model")
}

// nameOrMapping decodes a scalar into name, or a mapping with only the known
// keys into v (a type without this unmarshaler); shape says what is expected.
func nameOrMapping(node *yaml.Node, name *string, v any, shape string, known ...string) error {
	switch node.Kind {
	case yaml.ScalarNode:
		*name = node.Value
		return nil
	case yaml.MappingNode:
		if err := checkKeys(node, known...); err != nil {
			return err
		}
		return node.Decode(v)
	}
	return fmt.Errorf("line %d: %s", node.Line, shape)
}

// checkKeys refuses a mapping key outside known: a custom unmarshaler's
// node.Decode does not decode strictly.
func checkKeys(node *yaml.Node, known ...string) error {
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		ok := false
		for _, name := range known {
			ok = ok || k.Value == name
		}
		if !ok {
			return fmt.Errorf("line %d: unknown key %q (have %s)", k.Line, k.Value, strings.Join(known, ", "))
		}
	}
	return nil
}

// RateLimitConfig bounds what one client key may ask for per minute, across every
// replica sharing the cache (Redis). Nil fields inherit (a key's block from
// auth.rate_limit); 0 means no limit.
type RateLimitConfig struct {
	// RequestsPerMinute bounds the requests a key makes in a minute.
	RequestsPerMinute *int64 `yaml:"requests_per_minute"`
	// TokensPerMinute bounds the tokens (usage.total_tokens of every answer,
	// hidden calls included) a key spends in a minute. Usage is known only after
	// an answer, so a request is refused once the minute's tokens are spent.
	TokensPerMinute *int64 `yaml:"tokens_per_minute"`
}

// over returns rl with the fields of key that are set replacing its own.
func (rl RateLimitConfig) over(key *RateLimitConfig) RateLimitConfig {
	if key == nil {
		return rl
	}
	if key.RequestsPerMinute != nil {
		rl.RequestsPerMinute = key.RequestsPerMinute
	}
	if key.TokensPerMinute != nil {
		rl.TokensPerMinute = key.TokensPerMinute
	}
	return rl
}

func (rl *RateLimitConfig) set() bool {
	return rl != nil && (rl.RequestsPerMinute != nil || rl.TokensPerMinute != nil)
}

func (rl *RateLimitConfig) validate(where string, add func(string, ...any)) {
	if rl == nil {
		return
	}
	if v := rl.RequestsPerMinute; v != nil && *v < 0 {
		add("%s.requests_per_minute: %d is negative (0: no limit)", where, *v)
	}
	if v := rl.TokensPerMinute; v != nil && *v < 0 {
		add("%s.tokens_per_minute: %d is negative (0: no limit)", where, *v)
	}
}

// KeyEnvs returns the environment variables of the upstream's keys: the pool of
// api_key_envs, or api_key_env alone.
func (u *UpstreamConfig) KeyEnvs() []APIKeyRef {
	if len(u.APIKeyEnvs) > 0 {
		return u.APIKeyEnvs
	}
	if u.APIKeyEnv != "" {
		return []APIKeyRef{{Env: u.APIKeyEnv, Weight: defaultAPIKeyWeight}}
	}
	return nil
}

// UpstreamList returns the route's upstreams in order: upstreams, or upstream with
// upstream_model.
func (r *RouteConfig) UpstreamList() []RouteUpstream {
	if len(r.Upstreams) > 0 {
		return r.Upstreams
	}
	if r.Upstream == "" {
		return nil
	}
	return []RouteUpstream{{Name: r.Upstream, UpstreamModel: r.UpstreamModel}}
}

// retryPolicy is a RetryConfig with its defaults applied.
type retryPolicy struct {
	maxRetries int
	base, max  time.Duration
}

// policy applies the defaults; over, when set, replaces the fields it sets.
func (c RetryConfig) policy(over *RetryConfig) retryPolicy {
	p := retryPolicy{maxRetries: DefaultMaxRetries, base: DefaultRetryBaseDelay, max: DefaultRetryMaxDelay}
	for _, rc := range []*RetryConfig{&c, over} {
		if rc == nil {
			continue
		}
		if rc.MaxRetries != nil {
			p.maxRetries = *rc.MaxRetries
		}
		if rc.BaseDelay > 0 {
			p.base = rc.BaseDelay.Std()
		}
		if rc.MaxDelay > 0 {
			p.max = rc.MaxDelay.Std()
		}
	}
	return p
}

func (c *RetryConfig) validate(where string, add func(string, ...any)) {
	if c == nil {
		return
	}
	if n := c.MaxRetries; n != nil && (*n < 0 || *n > maxRetriesLimit) {
		add("%s.max_retries: %d is not between 0 and %d", where, *n, maxRetriesLimit)
	}
	if c.BaseDelay > 0 && c.MaxDelay > 0 && c.MaxDelay < c.BaseDelay {
		add("%s.max_delay: %s is below base_delay %s", where, c.MaxDelay, c.BaseDelay)
	}
}

func (c *BreakerConfig) validate(where string, add func(string, ...any)) {
	if n := c.Failures; n != nil && *n < 0 {
		add("%s.failures: %d is negative (0 turns the breaker off)", where, *n)
	}
}

// validateResilience checks an upstream's keys, retry and breaker blocks.
func (u *UpstreamConfig) validateResilience(name string, add func(string, ...any)) {
	where := "upstreams." + name
	if u.APIKeyEnv != "" && len(u.APIKeyEnvs) > 0 {
		add("%s: set api_key_env or api_key_envs, not both", where)
	}
	seen := map[string]bool{}
	for i, k := range u.APIKeyEnvs {
		if !strings.HasPrefix(k.Env, "FACTGATE_") {
			add("%s.api_key_envs[%d]: %q must name a FACTGATE_* environment variable", where, i, k.Env)
		}
		if seen[k.Env] {
			add("%s.api_key_envs[%d]: %s is listed twice", where, i, k.Env)
		}
		seen[k.Env] = true
		if k.Weight < 0 || k.Weight > maxAPIKeyWeight {
			add("%s.api_key_envs[%d].weight: %d is not between 0 and %d", where, i, k.Weight, maxAPIKeyWeight)
		}
	}
	u.Retry.validate(where+".retry", add)
	u.Breaker.validate(where+".breaker", add)
}

// validateUpstreams checks a route's upstream, upstream_model and upstreams.
func (r *RouteConfig) validateUpstreams(where string, upstreams map[string]UpstreamConfig, add func(string, ...any)) {
	switch {
	case r.Upstream != "" && len(r.Upstreams) > 0:
		add("%s: set upstream or upstreams, not both", where)
		return
	case len(r.Upstreams) > 0 && r.UpstreamModel != "":
		add("%s.upstream_model: with upstreams, set upstream_model on each entry", where)
		return
	case r.Upstream == "" && len(r.Upstreams) == 0:
		add("%s.upstream: missing (or list upstreams in order)", where)
		return
	}
	seen := map[string]bool{}
	dialect := ""
	for i, u := range r.UpstreamList() {
		key := "upstream"
		if len(r.Upstreams) > 0 {
			key = fmt.Sprintf("upstreams[%d]", i)
		}
		switch {
		case u.Name == "":
			add("%s.%s: missing the upstream's name", where, key)
		case seen[u.Name]:
			add("%s.%s: %q is listed twice", where, key, u.Name)
		default:
			up, ok := upstreams[u.Name]
			if !ok {
				add("%s.%s: no upstream named %q", where, key, u.Name)
				break
			}
			// A request is translated once, for the dialect its route speaks: a
			// fallback that speaks the other one would get a body it cannot read.
			api := up.API
			if api == "" {
				api = APIChat
			}
			if dialect == "" {
				dialect = api
			} else if api != dialect {
				add("%s.%s: upstream %q speaks api %s but the route's first upstream speaks %s: one route's upstreams must share one api", where, key, u.Name, api, dialect)
			}
		}
		seen[u.Name] = true
	}
	r.Retry.validate(where+".retry", add)
}
