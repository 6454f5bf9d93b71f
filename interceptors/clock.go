package interceptors

import (
	"strconv"
	"time"
)

// ParseClock reads a game-clock time "m:ss", "m:ss.c", "m:ss.cc", "mm:ss.ccc" (minutes
// may exceed 59; the fraction has up to 9 digits) or "h:mm:ss[.frac]". So "1:24",
// "1:24.00" and "01:24.0" are the same time. It reports false for anything else.
// It is the one time format factgate parses; packs' rules name times with it.
func ParseClock(s string) (time.Duration, bool) {
	if d, ok := parseShortClock(s); ok {
		return d, true
	}
	// Split into up to three colon-separated integer fields and an optional fraction.
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
	// Seconds (and minutes in h:mm:ss) must have two digits below 60.
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

// parseShortClock reads the times answers and logs nearly always write, "m:ss"
// or "mm:ss" with an optional fraction of 1 to 9 digits, in one pass with no
// division. It reports false for every other text, which ParseClock then reads
// in full (and may still accept: "1:2", "1:02:03").
func parseShortClock(s string) (time.Duration, bool) {
	if len(s) < 4 {
		return 0, false
	}
	m := int64(s[0] - '0')
	if m > 9 {
		return 0, false
	}
	i := 1
	if s[1] != ':' {
		d := int64(s[1] - '0')
		if d > 9 || s[2] != ':' {
			return 0, false
		}
		m, i = m*10+d, 2
	}
	// s[i] is the colon.
	if len(s) < i+3 {
		return 0, false
	}
	tens, ones := int64(s[i+1]-'0'), int64(s[i+2]-'0')
	if tens > 5 || ones > 9 {
		return 0, false
	}
	d := time.Duration(m)*time.Minute + time.Duration(tens*10+ones)*time.Second
	i += 3
	if i == len(s) {
		return d, true
	}
	digits := len(s) - i - 1
	if s[i] != '.' || digits < 1 || digits > 9 {
		return 0, false
	}
	var frac int64
	for i++; i < len(s); i++ {
		v := int64(s[i] - '0')
		if v > 9 {
			return 0, false
		}
		frac = frac*10 + v
	}
	return d + time.Duration(frac*fracScale[digits]), true
}

// fracScale[n] is the nanoseconds of a unit in the n-th decimal place.
var fracScale = [10]int64{1e9, 1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 1e2, 1e1, 1}

// FormatClock renders d as "m:ss.cc" (centiseconds), the op log's own format.
func FormatClock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	cs := int64(d / (10 * time.Millisecond))
	m := cs / 6000
	s := (cs / 100) % 60
	c := cs % 100
	b := strconv.AppendInt(nil, m, 10)
	b = append(b, ':', byte('0'+s/10), byte('0'+s%10), '.', byte('0'+c/10), byte('0'+c%10))
	return string(b)
}
