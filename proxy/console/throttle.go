package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/factgate/factgate/cache"
)

// loginThrottle bounds failed console logins a minute per client address (an
// IPv6 address by its /64) and per key prefix (the first 8 characters of the
// key tried, from any address), counted across replicas through the cache in a
// fixed one-minute window. Once a count reaches its bound, every login from
// that address or with that prefix gets 429 until the window ends — a correct
// key too, so that guessing gains nothing — without asking the cache again. A
// replica learns of failures counted elsewhere at its own next failure, so the
// fleet admits at most one more failure per replica than the bound.
//
// The failures are logged at WARN at most once every loginLogEvery, each line
// with the failures and refusals since the previous one.
type loginThrottle struct {
	c                  cache.Cache
	perAddr, perPrefix int64
	log                *slog.Logger
	now                func() time.Time
	mu                 sync.Mutex
	until              map[string]time.Time // throttled subjects, to the end of their window
	lastLog            time.Time
	failures, refusals int
	lastRemote         string
}

const (
	loginWindow    = time.Minute
	loginLogEvery  = 5 * time.Second
	keyPrefixBytes = 8
	// maxThrottled bounds the subjects a replica remembers as throttled; beyond
	// it the cache's count still refuses them, one call each.
	maxThrottled = 10000
)

func newLoginThrottle(c cache.Cache, cfg LoginThrottle, log *slog.Logger) *loginThrottle {
	per := func(n, def int) int64 {
		if n <= 0 {
			n = def
		}
		return int64(n)
	}
	return &loginThrottle{c: c, log: log, now: time.Now, until: map[string]time.Time{},
		perAddr: per(cfg.PerAddress, DefaultLoginsPerAddress), perPrefix: per(cfg.PerKeyPrefix, DefaultLoginsPerKeyPrefix)}
}

// loginSubjects names what a login attempt counts against: its address (by its
// /64 for IPv6) and its key's prefix, hashed so that no key material reaches
// the cache or the logs.
func (t *loginThrottle) subjects(ip net.IP, key string) (addr, prefix string) {
	if v4 := ip.To4(); v4 != nil {
		addr = "a:" + v4.String()
	} else {
		addr = "a:" + ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	p := key[:min(len(key), keyPrefixBytes)]
	sum := sha256.Sum256([]byte("factgate login key prefix\x00" + p))
	return addr, "p:" + hex.EncodeToString(sum[:8])
}

// refused reports whether logins of addr or prefix are throttled, and until when.
func (t *loginThrottle) refused(addr, prefix string) (time.Duration, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range [...]string{addr, prefix} {
		if until, ok := t.until[s]; ok {
			if now.Before(until) {
				t.refusals++
				return until.Sub(now), true
			}
			delete(t.until, s)
		}
	}
	return 0, false
}

// failed counts a failed login against addr and prefix; once either reaches
// its bound, both are throttled to the end of the window.
func (t *loginThrottle) failed(ctx context.Context, addr, prefix string) {
	now := t.now()
	start := now.Truncate(loginWindow)
	window := strconv.FormatInt(start.Unix(), 10)
	var over []string
	for _, s := range []struct {
		subject string
		limit   int64
	}{{addr, t.perAddr}, {prefix, t.perPrefix}} {
		counts, err := t.c.HashIncrGetAll(ctx, "console:loginfail:"+cache.HashTag(s.subject)+":"+window,
			map[string]int64{"failures": 1}, 2*loginWindow)
		if err == nil && counts["failures"] >= s.limit {
			over = append(over, s.subject)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range over {
		if _, ok := t.until[s]; ok || len(t.until) < maxThrottled {
			t.until[s] = start.Add(loginWindow)
		}
	}
	t.failures++
}

// note logs the failures and refusals since the last line, at most once every
// loginLogEvery; remote is the address of the attempt at hand.
func (t *loginThrottle) note(remote string) {
	now := t.now()
	t.mu.Lock()
	if now.Sub(t.lastLog) < loginLogEvery {
		t.mu.Unlock()
		return
	}
	failures, refusals := t.failures, t.refusals
	t.failures, t.refusals, t.lastLog = 0, 0, now
	t.mu.Unlock()
	t.log.Warn("console login failed", "remote", remote, "failures", failures, "throttled", refusals,
		"note", "failures and throttled logins since the previous line (at most one line every 5s)")
}
