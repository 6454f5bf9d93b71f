package cache

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestConfigYAML decodes a full cache block strictly, as the proxy's config loader does.
func TestConfigYAML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		doc     string
		want    func(Config) bool
		wantErr string
	}{
		{
			name: "full block",
			doc: `
memory: {max_bytes: 64MiB, max_entries: 5000, default_ttl: 1h}
redis:
  addrs: ["10.0.0.1:6379", "10.0.0.2:6379"]
  password_env: FACTGATE_REDIS_PASSWORD
  key_prefix: "factgate:v2:"
  dial_timeout: 250ms
  pool_size: 20
tiered: {local_ttl: 10s, probe_interval: 1s, error_backoff: 500ms}
`,
			want: func(c Config) bool {
				return c.Memory.MaxBytes == 64<<20 && c.Memory.MaxEntries == 5000 &&
					c.Memory.DefaultTTL.Std() == time.Hour && c.Redis != nil &&
					len(c.Redis.Addrs) == 2 && c.Redis.PasswordEnv == "FACTGATE_REDIS_PASSWORD" &&
					c.Redis.DialTimeout.Std() == 250*time.Millisecond && c.Redis.PoolSize == 20 &&
					c.Tiered.ErrorBackoff.Std() == 500*time.Millisecond
			},
		},
		{
			name: "plain integer size",
			doc:  "memory: {max_bytes: 1048576}",
			want: func(c Config) bool { return c.Memory.MaxBytes == 1<<20 && c.Redis == nil },
		},
		{
			name:    "bad size names the line",
			doc:     "memory:\n  max_bytes: 3 parsecs\n",
			wantErr: `line 2: bad size "3 parsecs"`,
		},
		{
			name:    "bad duration",
			doc:     "memory: {default_ttl: forever}",
			wantErr: `bad duration "forever": want e.g. 500ms, 30s, 2m`,
		},
		{
			name:    "size given as a mapping",
			doc:     "memory: {max_bytes: {mib: 8}}",
			wantErr: "want a scalar",
		},
		{
			name:    "unknown key",
			doc:     "memory: {max_byte: 8MiB}",
			wantErr: "max_byte",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var cfg Config
			dec := yaml.NewDecoder(strings.NewReader(tt.doc))
			dec.KnownFields(true)
			err := dec.Decode(&cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decode error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !tt.want(cfg) {
				t.Errorf("decoded %+v (redis %+v)", cfg, cfg.Redis)
			}
		})
	}
}
