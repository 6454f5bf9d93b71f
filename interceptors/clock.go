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
