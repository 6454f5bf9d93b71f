package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/configs/strictyaml"
	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/knowledge/rawjson"
	"github.com/factgate/factgate/proxy/console"
	"github.com/factgate/factgate/proxy/telemetry"
)

// Config is factgate's whole configuration, decoded strictly from YAML: an unknown
// key is an error that names it and the file. Provider and client keys never live
// in the file: they come from the environment variables it names (FACTGATE_*).
// The Redis password should too (cache.redis.password_env); a literal password is
// accepted for local setups.
type Config struct {
	Server    ServerConfig              `yaml:"server"`
	Log       LogConfig                 `yaml:"log"`
	Auth      AuthConfig                `yaml:"auth"`
	Upstreams map[string]UpstreamConfig `yaml:"upstreams"`
	Routes    []RouteConfig             `yaml:"routes"`
	Cache     cache.Config              `yaml:"cache"`
	Knowledge KnowledgeConfig           `yaml:"knowledge"`
	Traces    TracesConfig              `yaml:"traces"`
	Console   console.Config            `yaml:"console"`
	Telemetry telemetry.Config          `yaml:"telemetry"`

	// File is the path the config was loaded from ("" when built in code). Relative
	// paths in the config (overlays, prompt files) resolve against its directory.
	File string `yaml:"-"`
}

// ServerConfig sets the listener and the limits on what clients send.
type ServerConfig struct {
	// Listen is the address to serve on. Default "127.0.0.1:8080".
	Listen string `yaml:"listen"`
	// MetricsListen, when set, is a second address that serves /metrics (and only
	// it), and the main listener stops serving /metrics: Prometheus can scrape a
	// port clients cannot reach. Empty: /metrics on the main listener.
	MetricsListen string `yaml:"metrics_listen"`
	// MaxRequestBody bounds a request body; larger requests get 413. Default 16MiB.
	MaxRequestBody units.ByteSize `yaml:"max_request_body"`
	// MaxCheckBody bounds the body of POST /factgate/v1/check (facts and answer):
	// a check is CPU the caller does not pay upstream tokens for, so it has a
	// bound of its own below MaxRequestBody; larger bodies get 413. Default 4MiB.
	MaxCheckBody units.ByteSize `yaml:"max_check_body"`
	// MaxHeaderSize bounds the request line and headers; larger get 431. Default 16KiB.
	MaxHeaderSize units.ByteSize `yaml:"max_header_size"`
	// MaxJSONDepth bounds the nesting of objects and arrays in the JSON the proxy
	// reads: request bodies (deeper is a 400 invalid_json) and upstream answers on
	// routes with interceptors (deeper is a 502 upstream_bad_response). Every body
	// is checked against it in one linear pass before any recursive code reads it.
	// Default 128; at most 10000.
	MaxJSONDepth int `yaml:"max_json_depth"`
	// MaxResponseBody bounds an upstream answer the proxy buffers on an
	// intercepted route; larger answers fail with 502. Default 32MiB.
	MaxResponseBody units.ByteSize `yaml:"max_response_body"`
	// ReadTimeout bounds reading one client request. Default 60s.
	ReadTimeout units.Duration `yaml:"read_timeout"`
	// IdleTimeout closes idle keep-alive client connections. Default 120s.
	IdleTimeout units.Duration `yaml:"idle_timeout"`
	// ShutdownTimeout bounds draining in-flight requests on SIGTERM, after
	// DrainGrace. Default 30s.
	ShutdownTimeout units.Duration `yaml:"shutdown_timeout"`
	// DrainGrace is how long Shutdown keeps the listener open before closing it,
	// so that load balancers see /readyz answer 503 "draining" and take the
	// replica out; meanwhile new requests get 503 shutting_down. Default 5s
	// (applied by ParseConfig); 0s or nil: close at once.
	DrainGrace *units.Duration `yaml:"drain_grace"`
	// KeepaliveInterval is how often a streaming client whose answer is held for
	// validation gets a keep-alive (a blank line, which SSE clients skip).
	// Default 5s.
	KeepaliveInterval units.Duration `yaml:"keepalive_interval"`
	// StreamChunkRunes is how many characters each synthesized SSE content chunk
	// carries. Default 32.
	StreamChunkRunes int `yaml:"stream_chunk_runes"`
	// DisconnectProbeAfter is how long a request runs before the proxy starts
	// watching for the client going away (cheap requests skip the watch). Default 50ms.
	DisconnectProbeAfter units.Duration `yaml:"disconnect_probe_after"`
}

// LogConfig sets structured logging (slog, JSON).
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is json (default) or text.
	Format string `yaml:"format"`
	// Access logs one line per request. Default true.
	Access *bool `yaml:"access"`
	// DebugBodies logs request and response bodies at debug level, with secrets
	// and message contents redacted. Default false.
	DebugBodies bool `yaml:"debug_bodies"`
}

// AuthConfig says how clients authenticate.
type AuthConfig struct {
	// Mode is "passthrough" (default: the client's Authorization header goes
	// upstream) or "keys" (clients present proxy-issued keys; the upstream key comes
	// from the upstream's api_key_env).
	Mode string `yaml:"mode"`
	// Keys are the proxy-issued client keys (mode keys).
	Keys []ClientKeyConfig `yaml:"keys"`
	// RateLimit is every key's requests and tokens per minute unless the key
	// sets its own (mode keys). Absent: no limit.
	RateLimit RateLimitConfig `yaml:"rate_limit"`
}

// ClientKeyConfig is one proxy-issued client key. The key itself comes from the
// environment variable KeyEnv.
type ClientKeyConfig struct {
	// Name identifies the client in logs, metrics and A/B assignment, and owns
	// the traces of its requests.
	Name string `yaml:"name"`
	// KeyEnv names the environment variable holding the key (FACTGATE_KEY_...).
	KeyEnv string `yaml:"key_env"`
	// Admin lets the key read every client's traces (GET /factgate/v1/traces/{id})
	// and requests in the console, and edit knowledge overlays there; other keys
	// read only their own. Default false.
	Admin bool `yaml:"admin"`
	// RateLimit replaces the fields of auth.rate_limit it sets, for this key.
	RateLimit *RateLimitConfig `yaml:"rate_limit"`
}

// UpstreamConfig is one OpenAI-compatible provider.
type UpstreamConfig struct {
	// BaseURL is the provider's API base, including its /v1 ("https://api.deepseek.com/v1").
	// A client path /v1/<rest> goes to <base_url>/<rest>. Nothing in a request can
	// change it.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable with the provider key, used in auth
	// mode keys (and in passthrough mode when the client sends no Authorization).
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKeyEnvs is a pool of provider keys, instead of APIKeyEnv: calls spread
	// over them by weight, and a key the provider answers 401 or 429 cools down
	// while the others carry on.
	APIKeyEnvs []APIKeyRef `yaml:"api_key_envs"`
	// KeyCooldown is how long a pool key the provider rejected (401) is left out;
	// a 429 leaves it out for the provider's requested wait, at most this long.
	// Default 60s.
	KeyCooldown units.Duration `yaml:"key_cooldown"`
	// Retry says how failed calls are retried. See RetryConfig.
	Retry RetryConfig `yaml:"retry"`
	// Breaker is the upstream's circuit breaker. See BreakerConfig.
	Breaker BreakerConfig `yaml:"breaker"`
	// ConnectTimeout bounds dialing (and waiting for a free slot under
	// MaxConcurrent). Default 5s.
	ConnectTimeout units.Duration `yaml:"connect_timeout"`
	// ReadTimeout bounds waiting for the response headers, and each read of a
	// streamed body. Default 120s.
	ReadTimeout units.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds sending a request. Default 30s.
	WriteTimeout units.Duration `yaml:"write_timeout"`
	// IdleTimeout drops pooled connections idle longer than this. Default 60s.
	IdleTimeout units.Duration `yaml:"idle_timeout"`
	// MaxConcurrent bounds concurrent requests to this upstream; 0 means 1024.
	MaxConcurrent int `yaml:"max_concurrent"`
	// MaxIdleConns bounds pooled idle connections. Default 256.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// API is the dialect the upstream is asked Responses API requests in:
	// APIChat (the default: the provider serves chat completions only, so a
	// POST /v1/responses is translated to a chat completion and its answer back)
	// or APIResponses (the provider serves /v1/responses itself, as OpenAI does).
	// Chat completions go as chat completions either way.
	API string `yaml:"api"`
}

// The values of UpstreamConfig.API.
const (
	APIChat      = "chat"
	APIResponses = "responses"
)

// RouteConfig routes chat completions by the request's model.
type RouteConfig struct {
	// Name identifies the route in metrics, logs and traces.
	Name string `yaml:"name"`
	// Models are the model names (aliases) that select this route ("ra3-analyst").
	Models []string `yaml:"models"`
	// Default makes the route serve models no other route names. At most one.
	Default bool `yaml:"default"`
	// Upstream names an entry of upstreams. Exclusive with Upstreams.
	Upstream string `yaml:"upstream"`
	// UpstreamModel replaces the request's model before forwarding ("deepseek-chat").
	// Empty keeps the client's model. Only with Upstream.
	UpstreamModel string `yaml:"upstream_model"`
	// Upstreams lists the route's upstreams in order, each with its own model:
	// when one is exhausted (its retries spent, its circuit open, unreachable) the
	// next answers. UpstreamList reads either form.
	Upstreams []RouteUpstream `yaml:"upstreams"`
	// Retry, when set, replaces the fields it sets of each upstream's retry block
	// for this route's calls.
	Retry *RetryConfig `yaml:"retry"`
	// StreamReasoning forwards upstream reasoning_content live to streaming clients
	// while the content is held for validation.
	StreamReasoning bool `yaml:"stream_reasoning"`
	// ResponseModel is the model name the answer carries: ResponseModelUpstream
	// (empty, the default: the upstream's, as OpenAI answers with the dated
	// snapshot it used) or ResponseModelAlias (the model the client asked for).
	// "alias" needs a route with interceptors: a pass-through route relays the
	// upstream's answer unchanged.
	ResponseModel string `yaml:"response_model"`

	// Pack names the route's domain pack ("ra3", "dnd"). A route with a pack gets
	// its request context resolved (knowledge set, scopes, players, session).
	Pack string `yaml:"pack"`

	// Blocks are the route's stage blocks by stage name ("validate: {}"): every
	// key that is not one of the route's own. Each is kept as YAML and decoded
	// strictly by the stage that owns it when the chain is built (see
	// proxy/chain.go for the stages and their order); a key that names no stage
	// is a config error that lists them.
	Blocks map[string]yaml.Node `yaml:",inline"`
}

// The values of RouteConfig.ResponseModel.
const (
	ResponseModelUpstream = "upstream"
	ResponseModelAlias    = "alias"
)

// KnowledgeConfig locates user knowledge.
type KnowledgeConfig struct {
	// PacksDir is a directory of user packs (one folder each), loaded beside the
	// built-in ones. Empty: built-in packs only.
	PacksDir string `yaml:"packs_dir"`
	// Overlays maps a knowledge set name to a user overlay file (same structure as a
	// set), reloaded on change without restart.
	Overlays map[string]string `yaml:"overlays"`
}

// TracesConfig sets how traces are kept.
type TracesConfig struct {
	// TTL is how long a trace can be fetched. Default 1h.
	TTL units.Duration `yaml:"ttl"`
	// Content keeps every attempt's answer text in the trace. Default true.
	Content *bool `yaml:"content"`
	// MemoryBytes bounds the in-process memory tier of traces, apart from the
	// cache's own: traces never evict fact indexes or A/B counters. With Redis,
	// traces are also kept there, so any replica serves them. Default 16MiB.
	MemoryBytes units.ByteSize `yaml:"memory_bytes"`
	// MaxBytes bounds one stored trace: a larger one keeps its structure but has
	// its texts (answers, the console's copy of the request) cut (then dropped),
	// and a note says so. Default 64KiB.
	MaxBytes units.ByteSize `yaml:"max_bytes"`
}

// Defaults of TracesConfig.
const (
	DefaultTracesMemoryBytes units.ByteSize = 16 << 20
	DefaultTraceMaxBytes     units.ByteSize = 64 << 10
)

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := ParseConfig(b, path)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// ParseConfig decodes YAML strictly, applies defaults and validates. file names
// the source in errors.
func ParseConfig(b []byte, file string) (*Config, error) {
	cfg := &Config{File: file}
	if err := strictyaml.Decode(b, file, cfg); err != nil && !errors.Is(err, strictyaml.ErrEmpty) {
		return nil, err
	}
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cfg, nil
}

// Resolve returns path relative to the config file's directory (absolute paths
// and configs built in code are returned unchanged).
func (c *Config) Resolve(path string) string {
	if path == "" || filepath.IsAbs(path) || c.File == "" {
		return path
	}
	return filepath.Join(filepath.Dir(c.File), path)
}

func (c *Config) applyDefaults() {
	s := &c.Server
	if s.Listen == "" {
		s.Listen = "127.0.0.1:8080"
	}
	if s.MaxRequestBody == 0 {
		s.MaxRequestBody = 16 << 20
	}
	if s.MaxCheckBody == 0 {
		s.MaxCheckBody = DefaultMaxCheckBody
	}
	if s.MaxHeaderSize == 0 {
		s.MaxHeaderSize = 16 << 10
	}
	if s.MaxResponseBody == 0 {
		s.MaxResponseBody = 32 << 20
	}
	if s.MaxJSONDepth == 0 {
		s.MaxJSONDepth = rawjson.DefaultMaxDepth
	}
	if s.ReadTimeout == 0 {
		s.ReadTimeout = units.Duration(60 * time.Second)
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = units.Duration(120 * time.Second)
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = units.Duration(30 * time.Second)
	}
	if s.DrainGrace == nil {
		d := units.Duration(5 * time.Second)
		s.DrainGrace = &d
	}
	if s.KeepaliveInterval == 0 {
		s.KeepaliveInterval = units.Duration(5 * time.Second)
	}
	if s.StreamChunkRunes == 0 {
		s.StreamChunkRunes = 32
	}
	if s.DisconnectProbeAfter == 0 {
		s.DisconnectProbeAfter = units.Duration(50 * time.Millisecond)
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "json"
	}
	if c.Log.Access == nil {
		t := true
		c.Log.Access = &t
	}
	if c.Auth.Mode == "" {
		c.Auth.Mode = "passthrough"
	}
	for name, u := range c.Upstreams {
		if u.ConnectTimeout == 0 {
			u.ConnectTimeout = units.Duration(5 * time.Second)
		}
		if u.ReadTimeout == 0 {
			u.ReadTimeout = units.Duration(120 * time.Second)
		}
		if u.WriteTimeout == 0 {
			u.WriteTimeout = units.Duration(30 * time.Second)
		}
		if u.IdleTimeout == 0 {
			u.IdleTimeout = units.Duration(60 * time.Second)
		}
		if u.MaxConcurrent == 0 {
			u.MaxConcurrent = 1024
		}
		if u.MaxIdleConns == 0 {
			u.MaxIdleConns = 256
		}
		if u.API == "" {
			u.API = APIChat
		}
		if u.KeyCooldown == 0 {
			u.KeyCooldown = units.Duration(DefaultKeyCooldown)
		}
		if u.Breaker.Cooldown == 0 {
			u.Breaker.Cooldown = units.Duration(DefaultBreakerCooldown)
		}
		c.Upstreams[name] = u
	}
	if c.Traces.TTL == 0 {
		c.Traces.TTL = units.Duration(time.Hour)
	}
	if c.Traces.Content == nil {
		t := true
		c.Traces.Content = &t
	}
	c.Console.ApplyDefaults(c.Auth.Mode)
	if c.Traces.MemoryBytes == 0 {
		c.Traces.MemoryBytes = DefaultTracesMemoryBytes
	}
	if c.Traces.MaxBytes == 0 {
		c.Traces.MaxBytes = DefaultTraceMaxBytes
	}
}

// DefaultMaxCheckBody is server.max_check_body's default: about five times the
// largest operation log of the fixtures (862 KB), a check of it costs tens of
// milliseconds of CPU.
const DefaultMaxCheckBody = 4 << 20

// maxJSONDepthLimit caps server.max_json_depth: encoding/json refuses deeper
// input, and the recursive readers behind the check (gjson) use stack in
// proportion to it.
const maxJSONDepthLimit = 10000

// Validate checks the config's consistency; the error names the offending key.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		add("log.format: %q is not json or text", c.Log.Format)
	}
	switch c.Auth.Mode {
	case "passthrough":
		if len(c.Auth.Keys) > 0 {
			add("auth.keys: keys are only used with auth.mode: keys")
		}
		if c.Auth.RateLimit.set() {
			add("auth.rate_limit: rate limits are per client key: they need auth.mode: keys")
		}
	case "keys":
		if len(c.Auth.Keys) == 0 {
			add("auth.keys: auth.mode keys needs at least one key")
		}
		seen := map[string]bool{}
		c.Auth.RateLimit.validate("auth.rate_limit", add)
		for i, k := range c.Auth.Keys {
			k.RateLimit.validate(fmt.Sprintf("auth.keys[%d].rate_limit", i), add)
			if k.Name == "" {
				add("auth.keys[%d].name: missing", i)
			}
			if seen[k.Name] {
				add("auth.keys[%d].name: duplicate %q", i, k.Name)
			}
			seen[k.Name] = true
			if !strings.HasPrefix(k.KeyEnv, "FACTGATE_") {
				add("auth.keys[%d].key_env: %q must name a FACTGATE_* environment variable", i, k.KeyEnv)
			}
		}
	default:
		add("auth.mode: %q is not passthrough or keys", c.Auth.Mode)
	}
	if m := c.Server.MetricsListen; m != "" && m == c.Server.Listen && !anyPort(m) {
		add("server.metrics_listen: %q is server.listen: set another address, or leave it empty to serve /metrics on the main listener", c.Server.MetricsListen)
	}
	if c.Server.MaxCheckBody < 0 {
		add("server.max_check_body: %s is negative", c.Server.MaxCheckBody)
	}
	if d := c.Server.MaxJSONDepth; d < 1 || d > maxJSONDepthLimit {
		add("server.max_json_depth: %d is not between 1 and %d", d, maxJSONDepthLimit)
	}
	if len(c.Upstreams) == 0 {
		add("upstreams: at least one upstream is required")
	}
	for name, u := range c.Upstreams {
		if u.BaseURL == "" {
			add("upstreams.%s.base_url: missing", name)
		} else if _, err := newUpstream(name, u); err != nil {
			add("upstreams.%s.base_url: %v", name, err)
		}
		if u.APIKeyEnv != "" && !strings.HasPrefix(u.APIKeyEnv, "FACTGATE_") {
			add("upstreams.%s.api_key_env: %q must name a FACTGATE_* environment variable", name, u.APIKeyEnv)
		}
		if u.MaxConcurrent < 0 || u.MaxIdleConns < 0 {
			add("upstreams.%s: max_concurrent and max_idle_conns must not be negative", name)
		}
		switch u.API {
		case "", APIChat, APIResponses:
		default:
			add("upstreams.%s.api: %q is not chat or responses", name, u.API)
		}
		u.validateResilience(name, add)
	}
	if len(c.Routes) == 0 {
		add("routes: at least one route is required")
	}
	names := map[string]bool{}
	models := map[string]string{}
	defaults := 0
	for i, r := range c.Routes {
		where := fmt.Sprintf("routes[%d]", i)
		if r.Name == "" {
			add("%s.name: missing", where)
		} else {
			where = fmt.Sprintf("routes[%d] (%s)", i, r.Name)
		}
		if names[r.Name] {
			add("%s.name: duplicate route name %q", where, r.Name)
		}
		names[r.Name] = true
		r.validateUpstreams(where, c.Upstreams, add)
		if r.Default {
			defaults++
		}
		if len(r.Models) == 0 && !r.Default {
			add("%s.models: a route needs models or default: true", where)
		}
		for _, m := range r.Models {
			if other, ok := models[m]; ok {
				add("%s.models: %q is already routed by %q", where, m, other)
			}
			models[m] = r.Name
		}
		switch r.ResponseModel {
		case "", ResponseModelUpstream, ResponseModelAlias:
		default:
			add("%s.response_model: %q is not upstream or alias", where, r.ResponseModel)
		}
	}
	if defaults > 1 {
		add("routes: more than one route has default: true")
	}
	if c.Traces.MemoryBytes < 0 {
		add("traces.memory_bytes: %d is negative", c.Traces.MemoryBytes)
	}
	if c.Traces.MaxBytes < 0 {
		add("traces.max_bytes: %d is negative", c.Traces.MaxBytes)
	} else if c.Traces.MemoryBytes > 0 && c.Traces.MaxBytes > c.Traces.MemoryBytes {
		add("traces.max_bytes: %s is more than traces.memory_bytes %s: no trace that large could be kept", c.Traces.MaxBytes, c.Traces.MemoryBytes)
	}
	if err := c.Console.Validate(c.Auth.Mode); err != nil {
		errs = append(errs, err)
	}
	if err := c.Telemetry.Validate(c.upstreamNames()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// upstreamNames are the configured upstreams' names.
func (c *Config) upstreamNames() map[string]bool {
	names := make(map[string]bool, len(c.Upstreams))
	for name := range c.Upstreams {
		names[name] = true
	}
	return names
}

// DrainGraceDuration is DrainGrace, zero when unset.
func (s *ServerConfig) DrainGraceDuration() time.Duration {
	if s.DrainGrace == nil {
		return 0
	}
	return time.Duration(*s.DrainGrace)
}

// SetUpstreamURL points the upstream named name at baseURL ("NAME=URL" of
// factgate serve --upstream), as if the file said so, and validates the result.
func (c *Config) SetUpstreamURL(name, baseURL string) error {
	u, ok := c.Upstreams[name]
	if !ok {
		names := make([]string, 0, len(c.Upstreams))
		for n := range c.Upstreams {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("no upstream named %q (have %s)", name, strings.Join(names, ", "))
	}
	u.BaseURL = baseURL
	c.Upstreams[name] = u
	return c.Validate()
}

// anyPort reports an address whose port the system picks (":0"): two of them never
// collide.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// DefaultRoute returns the route with default: true, or nil.
func (c *Config) DefaultRoute() *RouteConfig {
	for i := range c.Routes {
		if c.Routes[i].Default {
			return &c.Routes[i]
		}
	}
	return nil
}
