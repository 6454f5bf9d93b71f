package facts

import (
	"errors"
	"fmt"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// Defaults of Config.
const (
	// DefaultMemoryBytes bounds the in-process tier of decoded fact indexes, per
	// route. With the cache's and the traces' default budgets it keeps a default
	// install within 128 MB of RSS; a route that sees many different large logs
	// wants more.
	DefaultMemoryBytes units.ByteSize = 32 << 20
	// DefaultTTL is how long an encoded index stays in the shared cache.
	DefaultTTL = 24 * time.Hour
	// DefaultSessionTTL is how long a session's list of fact keys lives after its
	// latest segment.
	DefaultSessionTTL = 24 * time.Hour
	// DefaultMaxSessionSegments bounds the segments merged for one request.
	DefaultMaxSessionSegments = 32
	// MaxMaxBytes is the largest max_bytes accepted: one extraction reads at most
	// this much of the request's user text.
	MaxMaxBytes units.ByteSize = 1 << 30
)

// Config is a route's `facts:` block, decoded strictly with the route config (an
// unknown key is an error naming it). Zero fields take the defaults, so the zero
// Config — what a route that validates without a facts block gets — is the
// default configuration.
//
//	facts:
//	  memory_bytes: 32MiB
//	  ttl: 24h
//	  session_ttl: 24h
//	  max_bytes: 16MiB
//	  max_session_segments: 32
type Config struct {
	// MemoryBytes bounds the in-process tier: decoded fact indexes (and merged
	// session indexes, session records), charged an estimate of their heap size.
	// Zero is 32MiB. The bound is per route: each route with a facts stage has its
	// own tier.
	MemoryBytes units.ByteSize `yaml:"memory_bytes"`
	// TTL is how long an encoded index stays in the shared cache (key "facts:" +
	// the fact key) and in the in-process tier. Zero is 24h.
	TTL units.Duration `yaml:"ttl"`
	// SessionTTL is how long a session's set of fact keys (key "session:{id}:facts")
	// lives; every segment resets it. Zero is 24h, or ttl when that is shorter; it
	// may not be longer than ttl, since a segment's index lives ttl from its build.
	SessionTTL units.Duration `yaml:"session_ttl"`
	// MaxBytes bounds how much of the user text one extraction reads (the trimmed
	// lines plus one byte each). Lines past the bound are ignored and the index
	// reports Truncated; the trace says so. Zero is DefaultMaxBytes (16MiB); at most
	// 1GiB.
	MaxBytes units.ByteSize `yaml:"max_bytes"`
	// MaxSessionSegments bounds how many segments of a session are merged for one
	// request: the request's own and those closest before it in game time (then
	// after it). Zero is 32.
	MaxSessionSegments int `yaml:"max_session_segments"`
}

// settings is a Config with its defaults applied.
type settings struct {
	memoryBytes int64
	ttl         time.Duration
	sessionTTL  time.Duration
	maxBytes    int
	maxSegments int
}

// Validate reports a negative or out-of-range value, naming the key.
func (c Config) Validate() error {
	var errs []error
	if c.MemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("memory_bytes: %d is negative", c.MemoryBytes))
	}
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("ttl: %s is negative", c.TTL))
	}
	if c.SessionTTL < 0 {
		errs = append(errs, fmt.Errorf("session_ttl: %s is negative", c.SessionTTL))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max_bytes: %d is negative", c.MaxBytes))
	}
	if c.MaxBytes > MaxMaxBytes {
		errs = append(errs, fmt.Errorf("max_bytes: %s is more than the limit %s", c.MaxBytes, MaxMaxBytes))
	}
	if c.MaxSessionSegments < 0 {
		errs = append(errs, fmt.Errorf("max_session_segments: %d is negative", c.MaxSessionSegments))
	}
	if st := c.settings(); c.SessionTTL > 0 && st.sessionTTL > st.ttl {
		errs = append(errs, fmt.Errorf("session_ttl: %s is longer than ttl %s: a session would outlive its segments' indexes", c.SessionTTL, units.Duration(st.ttl)))
	}
	return errors.Join(errs...)
}

func (c Config) settings() settings {
	s := settings{
		memoryBytes: int64(c.MemoryBytes),
		ttl:         c.TTL.Std(),
		sessionTTL:  c.SessionTTL.Std(),
		maxBytes:    int(c.MaxBytes),
		maxSegments: c.MaxSessionSegments,
	}
	if s.memoryBytes == 0 {
		s.memoryBytes = int64(DefaultMemoryBytes)
	}
	if s.ttl == 0 {
		s.ttl = DefaultTTL
	}
	if s.sessionTTL == 0 {
		s.sessionTTL = min(DefaultSessionTTL, s.ttl)
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.maxSegments == 0 {
		s.maxSegments = DefaultMaxSessionSegments
	}
	return s
}
