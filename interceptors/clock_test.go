package interceptors

import (
	"testing"
	"time"
)

func TestParseClock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"minutes and seconds", "1:24", 84 * time.Second, true},
		{"centiseconds", "1:24.00", 84 * time.Second, true},
		{"padded minutes one decimal", "01:24.0", 84 * time.Second, true},
		{"fraction", "0:05.20", 5*time.Second + 200*time.Millisecond, true},
		{"minutes above 59", "75:00.50", 75*time.Minute + 500*time.Millisecond, true},
		{"hours", "1:02:03.5", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"seconds out of range", "1:60", 0, false},
		{"no seconds", "12", 0, false},
		{"empty", "", 0, false},
		{"trailing dot", "1:24.", 0, false},
		{"letters", "1:2a", 0, false},
		{"too many fields", "1:2:3:4", 0, false},
		{"space", " 1:24", 0, false},
		{"overflow", "99999999999999999:00", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseClock(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("ParseClock(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestFormatClock(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{
		84 * time.Second:                        "1:24.00",
		14*time.Minute + 32*time.Second + 400e6: "14:32.40",
		0:                                       "0:00.00",
	} {
		if got := FormatClock(in); got != want {
			t.Errorf("FormatClock(%v) = %q, want %q", in, got, want)
		}
	}
}
