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
//	  recent_requests: 1000
//	  request_bytes: 8KiB
//	  admin_key_env: FACTGATE_CONSOLE_ADMIN_KEY   # auth.mode passthrough only
type Config struct {
	// Enabled turns the console on. Nil means the default: on when auth.mode is
	// keys (every page needs a client key), off when it is passthrough (the proxy
	// then has no keys to log in with; see AdminKeyEnv).
	Enabled *bool `yaml:"enabled"`
	// SessionTTL is how long a browser session lasts after login. Default 12h.
	SessionTTL units.Duration `yaml:"session_ttl"`
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

// Defaults.
const (
	DefaultSessionTTL     = 12 * time.Hour
	DefaultRecentRequests = 1000
	DefaultRequestBytes   = 8 << 10
	maxRecentRequests     = 100000
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
}

// On reports whether the console is enabled (after ApplyDefaults).
func (c *Config) On() bool { return c.Enabled != nil && *c.Enabled }

// Validate checks the block against the proxy's auth.mode; errors name the key.
func (c *Config) Validate(authMode string) error {
	var errs []error
	if c.SessionTTL < 0 || (c.SessionTTL > 0 && time.Duration(c.SessionTTL) < time.Minute) {
		errs = append(errs, fmt.Errorf("console.session_ttl: %s is shorter than a minute", time.Duration(c.SessionTTL)))
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
