package interceptors

import (
	"testing"
	"time"
)

// refParseClock is ParseClock as it was before its short-time path: the
// reference the differential tests compare it with.
func refParseClock(s string) (time.Duration, bool) {
	var fields [3]int64
	n := 0
	i := 0
	for {
		start := i
		var v int64
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			v = v*10 + int64(s[i]-'0')
			if v > 1<<40 {
				return 0, false
			}
			i++
		}
		if i == start || n == 3 {
			return 0, false
		}
		fields[n] = v
		n++
		if i < len(s) && s[i] == ':' {
			i++
			continue
		}
		break
	}
	if n < 2 {
		return 0, false
	}
	var total time.Duration
	switch n {
	case 2:
		if fields[1] >= 60 {
			return 0, false
		}
		total = time.Duration(fields[0])*time.Minute + time.Duration(fields[1])*time.Second
	case 3:
		if fields[1] >= 60 || fields[2] >= 60 {
			return 0, false
		}
		total = time.Duration(fields[0])*time.Hour + time.Duration(fields[1])*time.Minute + time.Duration(fields[2])*time.Second
	}
	if i < len(s) {
		if s[i] != '.' {
			return 0, false
		}
		i++
		start := i
		var frac int64
		scale := int64(time.Second)
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if i-start >= 9 {
				return 0, false
			}
			scale /= 10
			frac += int64(s[i]-'0') * scale
			i++
		}
		if i == start || i != len(s) {
			return 0, false
		}
		total += time.Duration(frac)
	}
	return total, true
}

// TestParseClockMatchesReference compares ParseClock with the reference on every
// text of up to seven bytes over an alphabet of digits, separators and a letter,
// plus longer fractions and edge shapes.
func TestParseClockMatchesReference(t *testing.T) {
	t.Parallel()
	alphabet := []byte("0159:.a ")
	buf := make([]byte, 0, 7)
	var walk func(depth int)
	checked := 0
	walk = func(depth int) {
		s := string(buf)
		got, ok := ParseClock(s)
		want, wok := refParseClock(s)
		if got != want || ok != wok {
			t.Fatalf("ParseClock(%q) = %v, %v; reference %v, %v", s, got, ok, want, wok)
		}
		checked++
		if depth == cap(buf) {
			return
		}
		for _, c := range alphabet {
			buf = append(buf, c)
			walk(depth + 1)
			buf = buf[:len(buf)-1]
		}
	}
	walk(0)
	for _, s := range []string{
		"1:24.000000000", "1:24.0000000000", "1:24.123456789", "1:24.1234567891", "99:59.999999999",
		"12:34.5", "00:00", "0:00.0", "9:60", "09:59", "123:45", "1:2:3", "1:02:03.5", "1:24.", "1:24.x",
		"1:24\x00", "\xff:24", "1:\xff4", "01:24.0", "1:245", "1:24:", "1::24", ":24", "1:24.5.", "5:5",
	} {
		got, ok := ParseClock(s)
		want, wok := refParseClock(s)
		if got != want || ok != wok {
			t.Fatalf("ParseClock(%q) = %v, %v; reference %v, %v", s, got, ok, want, wok)
		}
	}
	if checked < 2_000_000 {
		t.Fatalf("checked only %d texts", checked)
	}
}

func FuzzParseClock(f *testing.F) {
	for _, s := range []string{"1:24", "1:24.00", "01:24.0", "75:00.50", "1:02:03.5", "1:60", "1:24.", "1:24.1234567891", "9:59.999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseClock(s)
		want, wok := refParseClock(s)
		if got != want || ok != wok {
			t.Fatalf("ParseClock(%q) = %v, %v; reference %v, %v", s, got, ok, want, wok)
		}
	})
}
