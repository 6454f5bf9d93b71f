package units

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// TestMillisJSON: a trace's durations read as milliseconds with a fraction, and
// read back.
func TestMillisJSON(t *testing.T) {
	t.Parallel()
	d := Millis(12345 * time.Microsecond)
	b, err := json.Marshal(map[string]Millis{"upstream": d})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"upstream":12.345}` {
		t.Fatalf("marshalled %s, want {\"upstream\":12.345}", b)
	}
	var back map[string]Millis
	if err := json.Unmarshal(b, &back); err != nil || back["upstream"] != d {
		t.Fatalf("read back %v, %v; want %v", back, err, d)
	}
}
