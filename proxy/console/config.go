package console

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// Config is the `console` block.
//
//	console:
//	  enabled: true          # default: on with auth.mode keys, off with passthrough
//	  session_ttl: 12h
//	  offline_session_grace: 30s
//	  recent_requests: 1000
//	  request_bytes: 8KiB
//	  max_entry_bytes: 16KiB
//	  login_throttle: {per_address: 10, per_key_prefix: 50}
//	  admin_key_env: FACTGATE_CONSOLE_ADMIN_KEY   # auth.mode passthrough only
type Config struct {
	// Enabled turns the console on. Nil means the default: on when auth.mode is
	// keys (every page needs a client key), off when it is passthrough (the proxy
	// then has no keys to log in with; see AdminKeyEnv).
	Enabled *bool `yaml:"enabled"`
	// SessionTTL is how long a browser session lasts after login. Default 12h.
	SessionTTL units.Duration `yaml:"session_ttl"`
	// OfflineSessionGrace is how long, while Redis fails, a replica keeps
	// accepting a session after Redis last confirmed it there (every request
	// reads its session from Redis); then it refuses the session until Redis
	// answers. Nil means 30s; 0s refuses every session Redis cannot confirm.
	OfflineSessionGrace *units.Duration `yaml:"offline_session_grace"`
	// MaxEntryBytes bounds a knowledge entry saved from the console: its id,
	// tags and text together (a larger edit gets 413). Default 16KiB.
	MaxEntryBytes units.ByteSize `yaml:"max_entry_bytes"`
	// LoginThrottle bounds failed logins a minute, across replicas.
	LoginThrottle LoginThrottle `yaml:"login_throttle"`
	// RecentRequests bounds the list of recent intercepted requests each replica
	// keeps in memory for the requests page. Default 1000.
	RecentRequests int `yaml:"recent_requests"`
	// RequestBytes bounds each message of the client's request that the trace
	// keeps for the trace page (an operation log is cut there). Nil means 8KiB;
	// 0 keeps none. traces.content: false keeps none either.
	RequestBytes *units.ByteSize `yaml:"request_bytes"`
	// AdminKeyEnv names the environment variable holding the console's admin key
	// in auth mode passthrough: whoever logs in with it may edit knowledge. Without
	// it a passthrough console is read-only. In auth mode keys, flag a key with
	// `admin: true` instead.
	AdminKeyEnv string `yaml:"admin_key_env"`
}

// LoginThrottle is the `console.login_throttle` block: failed logins a minute
// (a fixed window, counted across replicas through the cache) after which
// logins get 429 until the minute ends. Zero fields take the defaults.
type LoginThrottle struct {
	// PerAddress counts the failures from one client address (an IPv6 address
	// by its /64). Default 10.
	PerAddress int `yaml:"per_address"`
	// PerKeyPrefix counts the failures with keys that share their first 8
	// characters, from any address. Default 50.
	PerKeyPrefix int `yaml:"per_key_prefix"`
}

// Defaults.
const (
	DefaultSessionTTL          = 12 * time.Hour
	DefaultOfflineSessionGrace = 30 * time.Second
	DefaultRecentRequests      = 1000
	DefaultRequestBytes        = 8 << 10
	DefaultMaxEntryBytes       = 16 << 10
	DefaultLoginsPerAddress    = 10
	DefaultLoginsPerKeyPrefix  = 50
	maxRecentRequests          = 100000
)

// ApplyDefaults fills the zero fields; authMode is the proxy's auth.mode.
func (c *Config) ApplyDefaults(authMode string) {
	if c.Enabled == nil {
		on := authMode == "keys"
		c.Enabled = &on
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = units.Duration(DefaultSessionTTL)
	}
	if c.RecentRequests == 0 {
		c.RecentRequests = DefaultRecentRequests
	}
	if c.RequestBytes == nil {
		n := units.ByteSize(DefaultRequestBytes)
		c.RequestBytes = &n
	}
	if c.OfflineSessionGrace == nil {
		d := units.Duration(DefaultOfflineSessionGrace)
		c.OfflineSessionGrace = &d
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.LoginThrottle.PerAddress == 0 {
		c.LoginThrottle.PerAddress = DefaultLoginsPerAddress
	}
	if c.LoginThrottle.PerKeyPrefix == 0 {
		c.LoginThrottle.PerKeyPrefix = DefaultLoginsPerKeyPrefix
	}
}

// On reports whether the console is enabled (after ApplyDefaults).
func (c *Config) On() bool { return c.Enabled != nil && *c.Enabled }

// Validate checks the block against the proxy's auth.mode; errors name the key.
func (c *Config) Validate(authMode string) error {
	var errs []error
	if c.SessionTTL < 0 || (c.SessionTTL > 0 && time.Duration(c.SessionTTL) < time.Minute) {
		errs = append(errs, fmt.Errorf("console.session_ttl: %s is shorter than a minute", time.Duration(c.SessionTTL)))
	}
	if g := c.OfflineSessionGrace; g != nil && (*g < 0 || time.Duration(*g) > time.Duration(c.SessionTTL)) {
		errs = append(errs, fmt.Errorf("console.offline_session_grace: %s is not between 0s and session_ttl", time.Duration(*g)))
	}
	if c.MaxEntryBytes < 0 {
		errs = append(errs, fmt.Errorf("console.max_entry_bytes: %s is negative", c.MaxEntryBytes))
	}
	if c.LoginThrottle.PerAddress < 0 || c.LoginThrottle.PerKeyPrefix < 0 {
		errs = append(errs, errors.New("console.login_throttle: per_address and per_key_prefix must not be negative"))
	}
	if c.RecentRequests < 0 || c.RecentRequests > maxRecentRequests {
		errs = append(errs, fmt.Errorf("console.recent_requests: %d is not between 1 and %d", c.RecentRequests, maxRecentRequests))
	}
	if c.AdminKeyEnv != "" {
		switch {
		case authMode == "keys":
			errs = append(errs, errors.New("console.admin_key_env: only for auth.mode passthrough; with auth.mode keys flag a key with admin: true"))
		case !strings.HasPrefix(c.AdminKeyEnv, "FACTGATE_"):
			errs = append(errs, fmt.Errorf("console.admin_key_env: %q must name a FACTGATE_* environment variable", c.AdminKeyEnv))
		}
	}
	return errors.Join(errs...)
}
