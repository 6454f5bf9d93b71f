package cache

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    ByteSize
		wantErr bool
	}{
		{name: "binary mebibytes", in: "8MiB", want: 8 << 20},
		{name: "binary kibibytes", in: "64KiB", want: 64 << 10},
		{name: "decimal gigabyte", in: "1GB", want: 1_000_000_000},
		{name: "plain byte count", in: "4096", want: 4096},
		{name: "bytes suffix", in: "100B", want: 100},
		{name: "unit in lower case after a space", in: "2 mib", want: 2 << 20},
		{name: "fraction of a unit", in: "1.5GiB", want: 3 << 29},
		{name: "zero", in: "0", want: 0},
		{name: "unknown unit", in: "3 parsecs", wantErr: true},
		{name: "no number", in: "MiB", wantErr: true},
		{name: "negative", in: "-1MiB", wantErr: true},
		{name: "fraction of a byte", in: "1.5", wantErr: true},
		{name: "overflow", in: "99999999TiB", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseByteSize(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseByteSize(%q) = %d, want an error", tt.in, got)
				}
				if !strings.Contains(err.Error(), "want e.g.") || !strings.Contains(err.Error(), tt.in) {
					t.Errorf("error %q should quote the input and say what is expected", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			back, err := ParseByteSize(got.String())
			if err != nil || back != got {
				t.Errorf("String() %q does not read back: %d, %v", got.String(), back, err)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    time.Duration
		wantErr bool
	}{
		{name: "milliseconds", in: "500ms", want: 500 * time.Millisecond},
		{name: "seconds", in: "30s", want: 30 * time.Second},
		{name: "compound", in: "1h30m", want: 90 * time.Minute},
		{name: "zero", in: "0", want: 0},
		{name: "bare number is ambiguous", in: "30", wantErr: true},
		{name: "negative", in: "-5s", wantErr: true},
		{name: "nonsense", in: "3 parsecs", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDuration(tt.in)
			if tt.wantErr {
				want := `bad duration "` + tt.in + `": want e.g. 500ms, 30s, 2m`
				if err == nil || err.Error() != want {
					t.Fatalf("ParseDuration(%q) = %v, %v; want error %q", tt.in, got, err, want)
				}
				return
			}
			if err != nil || got.Std() != tt.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

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

func FuzzParseByteSize(f *testing.F) {
	for _, seed := range []string{"8MiB", "64KiB", "1GB", "4096", "1.5GiB", "3 parsecs", "", "9223372036854775807", "0.1B"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		size, err := ParseByteSize(s)
		if err != nil {
			return
		}
		if size < 0 {
			t.Fatalf("ParseByteSize(%q) = %d, negative", s, size)
		}
		back, err := ParseByteSize(size.String())
		if err != nil || back != size {
			t.Fatalf("ParseByteSize(%q) = %d renders %q, which reads back as %d, %v", s, size, size.String(), back, err)
		}
	})
}
