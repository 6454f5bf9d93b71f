package proxy

import (
	"strings"
	"testing"
	"time"
)

func TestConfigErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "upstreams: {u: {base_url: 'http://x/v1', retries: 3}}\nroutes: [{name: r, default: true, upstream: u}]", "bad.yaml:1: upstreams.u.retries: unknown key (did you mean retry?)"},
		{"unknown top-level key", "upstream: {}\n", "bad.yaml:1: upstream: unknown key (did you mean upstreams?)"},
		{"bad duration", "server: {read_timeout: 3 parsecs}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `3 parsecs`},
		{"bad size", "server: {max_request_body: lots}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `lots`},
		{"missing upstream", "upstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: nope}]", `routes[0] (r).upstream: no upstream named "nope"`},
		{"no upstreams", "routes: [{name: r, default: true, upstream: u}]", `upstreams: at least one upstream is required`},
		{"bad base url", "upstreams: {u: {base_url: 'ftp://x'}}\nroutes: [{name: r, default: true, upstream: u}]", `scheme must be http or https`},
		{"two defaults", "upstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: a, default: true, upstream: u}, {name: b, default: true, upstream: u}]", `more than one route has default: true`},
		{"duplicate alias", "upstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: a, models: [m], upstream: u}, {name: b, models: [m], upstream: u}]", `"m" is already routed by "a"`},
		{"secret in file", "upstreams: {u: {base_url: 'http://x/v1', api_key_env: OPENAI_KEY}}\nroutes: [{name: r, default: true, upstream: u}]", `must name a FACTGATE_* environment variable`},
		{"bad response_model", "upstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, models: [m], upstream: u, response_model: client}]", `routes[0] (r).response_model: "client" is not upstream or alias`},
		{"bad api", "upstreams: {u: {base_url: 'http://x/v1', api: completions}}\nroutes: [{name: r, default: true, upstream: u}]", `upstreams.u.api: "completions" is not chat or responses`},
		{"bad auth mode", "auth: {mode: open}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `auth.mode: "open"`},
		{"metrics on the main address", "server: {listen: '127.0.0.1:8080', metrics_listen: '127.0.0.1:8080'}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `server.metrics_listen: "127.0.0.1:8080" is server.listen`},
		{"admin, not a boolean", "auth: {mode: keys, keys: [{name: a, key_env: FACTGATE_KEY_A, admin: maybe}]}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `maybe`},
		{"negative JSON depth", "server: {max_json_depth: -1}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `server.max_json_depth: -1 is not between 1 and 10000`},
		{"JSON depth too large", "server: {max_json_depth: 10001}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `server.max_json_depth: 10001 is not between 1 and 10000`},
		{"trace bound over the trace tier", "traces: {memory_bytes: 1MiB, max_bytes: 2MiB}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `traces.max_bytes: 2MiB is more than traces.memory_bytes 1MiB`},
		{"bad trace tier", "traces: {memory_bytes: lots}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]", `lots`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(tc.yaml), "bad.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml") {
				t.Fatalf("error %q does not say %q and the file", err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte("upstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]"), "min.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Listen != "127.0.0.1:8080" || cfg.Server.MaxRequestBody != 16<<20 || cfg.Auth.Mode != "passthrough" || cfg.Upstreams["u"].MaxConcurrent != 1024 ||
		cfg.Server.MaxJSONDepth != 128 || cfg.Upstreams["u"].API != APIChat {
		t.Fatalf("defaults not applied: %+v", cfg.Server)
	}
	if got := cfg.Server.DrainGraceDuration(); got != 5*time.Second {
		t.Fatalf("drain_grace defaults to %v, want 5s", got)
	}
	cfg, err = ParseConfig([]byte("server: {drain_grace: 0s}\nupstreams: {u: {base_url: 'http://x/v1'}}\nroutes: [{name: r, default: true, upstream: u}]"), "min.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Server.DrainGraceDuration(); got != 0 {
		t.Fatalf("drain_grace: 0s reads as %v, want no grace", got)
	}
}
