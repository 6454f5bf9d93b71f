package cache

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/configs/units"
)

func TestRedisConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     RedisConfig
		wantErr string
	}{
		{name: "single node", cfg: RedisConfig{Addrs: []string{"127.0.0.1:6379"}}},
		{name: "cluster seeds", cfg: RedisConfig{Addrs: []string{"a:6379", "b:6379"}}},
		{name: "sentinel", cfg: RedisConfig{Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "mymaster", DB: 2}},
		{name: "url", cfg: RedisConfig{URL: "rediss://cache.internal:6380/3", PasswordEnv: "X"}},
		{name: "nothing", cfg: RedisConfig{}, wantErr: "give url or addrs"},
		{name: "both url and addrs", cfg: RedisConfig{URL: "redis://a:1", Addrs: []string{"b:2"}}, wantErr: "not both"},
		{name: "both passwords", cfg: RedisConfig{Addrs: []string{"a:1"}, Password: "p", PasswordEnv: "P"}, wantErr: "password or password_env"},
		{name: "braces in the prefix", cfg: RedisConfig{Addrs: []string{"a:1"}, KeyPrefix: "fg:{v1}:"}, wantErr: "hash tag"},
		{name: "db on a cluster", cfg: RedisConfig{Addrs: []string{"a:1", "b:2"}, DB: 1}, wantErr: "only database 0"},
		{name: "address without port", cfg: RedisConfig{Addrs: []string{"redis.internal"}}, wantErr: `addrs[0] "redis.internal": want host:port`},
		{name: "wrong url scheme", cfg: RedisConfig{URL: "http://user:secret@a:1"}, wantErr: "want redis://"},
		{name: "negative pool", cfg: RedisConfig{Addrs: []string{"a:1"}, PoolSize: -1}, wantErr: "pool_size"},
		{name: "negative cluster refresh", cfg: RedisConfig{Addrs: []string{"a:1", "b:2"}, ClusterRefreshInterval: -1}, wantErr: "cluster_refresh_interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks the URL's password: %v", err)
			}
		})
	}
}

func TestRedisConfigOptions(t *testing.T) {
	t.Setenv("FACTGATE_TEST_CACHE_PASSWORD", "from-env")
	tests := []struct {
		name    string
		cfg     RedisConfig
		check   func(t *testing.T, cfg RedisConfig)
		wantErr string
	}{
		{
			name: "short timeouts by default",
			cfg:  RedisConfig{Addrs: []string{"127.0.0.1:6379"}},
			check: func(t *testing.T, cfg RedisConfig) {
				o, _ := cfg.options()
				if o.DialTimeout != 500*time.Millisecond || o.ReadTimeout != 500*time.Millisecond || o.WriteTimeout != 500*time.Millisecond {
					t.Errorf("timeouts %v %v %v", o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
				}
				if cfg.mode() != "single" {
					t.Errorf("mode %s", cfg.mode())
				}
			},
		},
		{
			name: "password from the environment",
			cfg:  RedisConfig{Addrs: []string{"a:1"}, PasswordEnv: "FACTGATE_TEST_CACHE_PASSWORD"},
			check: func(t *testing.T, cfg RedisConfig) {
				if o, _ := cfg.options(); o.Password != "from-env" {
					t.Errorf("password %q", o.Password)
				}
			},
		},
		{
			name:    "password variable unset",
			cfg:     RedisConfig{Addrs: []string{"a:1"}, PasswordEnv: "FACTGATE_TEST_CACHE_UNSET"},
			wantErr: "FACTGATE_TEST_CACHE_UNSET is not set",
		},
		{
			name: "url gives address, db, user and tls; env password fills in",
			cfg:  RedisConfig{URL: "rediss://app@cache.internal:6380/3", PasswordEnv: "FACTGATE_TEST_CACHE_PASSWORD"},
			check: func(t *testing.T, cfg RedisConfig) {
				o, _ := cfg.options()
				if len(o.Addrs) != 1 || o.Addrs[0] != "cache.internal:6380" || o.DB != 3 || o.Username != "app" || o.Password != "from-env" || o.TLSConfig == nil {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "tls flag",
			cfg:  RedisConfig{Addrs: []string{"a:1"}, TLS: true},
			check: func(t *testing.T, cfg RedisConfig) {
				if o, _ := cfg.options(); o.TLSConfig == nil {
					t.Error("tls: true gave no TLS config")
				}
			},
		},
		{
			name: "one seed forced to cluster",
			cfg:  RedisConfig{Addrs: []string{"a:1"}, Cluster: true},
			check: func(t *testing.T, cfg RedisConfig) {
				if o, _ := cfg.options(); !o.IsClusterMode || cfg.mode() != "cluster" {
					t.Errorf("cluster mode %v, %s", o.IsClusterMode, cfg.mode())
				}
			},
		},
		{
			name: "sentinel mode",
			cfg:  RedisConfig{Addrs: []string{"a:1", "b:1"}, MasterName: "m"},
			check: func(t *testing.T, cfg RedisConfig) {
				if cfg.mode() != "sentinel" {
					t.Errorf("mode %s", cfg.mode())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.options()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("options error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, tt.cfg)
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name        string
		cfg         Config
		wantErr     string
		wantBackend string
		wantDegr    bool
	}{
		{name: "zero config is memory", wantBackend: "memory"},
		{
			name:        "unreachable redis starts degraded, not failed",
			cfg:         Config{Redis: &RedisConfig{Addrs: []string{"127.0.0.1:1"}}, Tiered: TieredConfig{ProbeInterval: noProbe}},
			wantBackend: "memory+redis",
			wantDegr:    true,
		},
		{name: "bad memory bound", cfg: Config{Memory: MemoryConfig{MaxEntries: -1}}, wantErr: "cache.memory.max_entries"},
		{name: "bad redis block", cfg: Config{Redis: &RedisConfig{}}, wantErr: "give url or addrs"},
		{name: "bad tiered block", cfg: Config{Tiered: TieredConfig{MaxPendingWrites: -1}}, wantErr: "max_pending_writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(tt.cfg, prometheus.NewRegistry(), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st := c.Status()
			if st.Backend != tt.wantBackend || st.Degraded != tt.wantDegr {
				t.Fatalf("Status = %+v", st)
			}
			// Whatever the backend's health, the cache works.
			if err := c.Set(ctx, "k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := c.Get(ctx, "k"); err != nil || !ok || string(v) != "v" {
				t.Fatalf("Get = %q, %v, %v", v, ok, err)
			}
		})
	}
}

func TestNewRegistersMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c, err := New(Config{}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, _ = c.Get(context.Background(), "absent")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	if got["factgate_cache_memory_misses_total"] != 1 {
		t.Fatalf("metrics %v; want one memory miss", got)
	}
	// A second cache on the same registry does not fail (tests, two servers in one process).
	if c2, err := New(Config{}, reg, nil); err != nil {
		t.Fatalf("second New on one registry: %v", err)
	} else {
		_ = c2.Close()
	}
}

// TestRedisClusterRefreshInterval: a Cluster client re-reads its slot map every
// cluster_refresh_interval (2s by default), not go-redis's 60s, so that a replica
// promoted after its master died is found within seconds.
func TestRedisClusterRefreshInterval(t *testing.T) {
	t.Parallel()
	dead := []string{"127.0.0.1:1", "127.0.0.1:2"} // refused at once: the start-up ping fails fast
	for _, tc := range []struct {
		name string
		cfg  RedisConfig
		want time.Duration
	}{
		{"default", RedisConfig{Addrs: dead}, 2 * time.Second},
		{"configured", RedisConfig{Addrs: dead, ClusterRefreshInterval: units.Duration(5 * time.Second)}, 5 * time.Second},
		{"one seed forced to cluster", RedisConfig{Addrs: dead[:1], Cluster: true}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := NewRedis(tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.cluster == nil {
				t.Fatal("no cluster client")
			}
			if got := r.cluster.Options().ClusterStateReloadInterval; got != tc.want {
				t.Errorf("slot map re-read every %v, want %v", got, tc.want)
			}
		})
	}
	r, err := NewRedis(RedisConfig{Addrs: dead[:1], ClusterRefreshInterval: units.Duration(5 * time.Second)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.cluster != nil || r.sharded() {
		t.Error("a single node got a cluster client")
	}
}
