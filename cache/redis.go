package cache

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factgate/factgate/configs/units"
)

// RedisConfig is the one configuration block for Redis: a single node, Sentinel or
// Cluster, chosen by the fields given. Zero fields take the defaults.
type RedisConfig struct {
	// URL ("redis://user:pass@host:6379/0", "rediss://..." for TLS) names a single
	// node; it is the alternative to Addrs (give one or the other). A password in the
	// URL is a secret in the config file: prefer PasswordEnv.
	URL string `yaml:"url"`
	// Addrs are host:port addresses: one is a single node, several are Cluster seed
	// nodes, and with MasterName they are Sentinels.
	Addrs []string `yaml:"addrs"`
	// MasterName selects Sentinel: the name of the master the Sentinels at Addrs watch.
	MasterName string `yaml:"master_name"`
	// Cluster forces Cluster mode with a single seed address (a managed cluster's one
	// endpoint); several Addrs without MasterName are Cluster anyway.
	Cluster bool `yaml:"cluster"`
	// Username is the ACL user; empty is the default user.
	Username string `yaml:"username"`
	// Password authenticates; empty is none. Set Password or PasswordEnv, not both.
	Password string `yaml:"password"`
	// PasswordEnv names the environment variable that holds the password, so the
	// secret stays out of the file. The variable must be set and non-empty.
	PasswordEnv string `yaml:"password_env"`
	// DB is the database number (single node and Sentinel only; Cluster has only 0).
	// With URL, a non-zero DB overrides the URL's path.
	DB int `yaml:"db"`
	// TLS connects with TLS (system roots, TLS 1.2 or later); "rediss://" implies it.
	TLS bool `yaml:"tls"`
	// KeyPrefix is put before every key; it carries the key layout's version so that
	// an incompatible release never reads an older one's entries. It must not contain
	// braces (they would become the Cluster hash tag). Empty is "factgate:v1:".
	KeyPrefix string `yaml:"key_prefix"`
	// DialTimeout, ReadTimeout and WriteTimeout bound each connection step so that a
	// slow Redis cannot stall requests. Zero is 500ms each.
	DialTimeout  units.Duration `yaml:"dial_timeout"`
	ReadTimeout  units.Duration `yaml:"read_timeout"`
	WriteTimeout units.Duration `yaml:"write_timeout"`
	// CallTimeout bounds one cache call to Redis as a whole: the wait for a pooled
	// connection, a dial, the command, its retry and the backoff between them. A
	// Redis that hangs (stopped, or its host gone without a reset) therefore holds a
	// call at most this long. Zero is ReadTimeout.
	CallTimeout units.Duration `yaml:"call_timeout"`
	// PoolSize is the number of connections per node; zero is go-redis's default
	// (10 per CPU).
	PoolSize int `yaml:"pool_size"`
	// ClusterRefreshInterval is how often a Cluster client in use re-reads the slot
	// map (CLUSTER SLOTS); a failed call re-reads it at once. Without it a replica
	// would keep calling a dead master for go-redis's default of 60s after its
	// replica took over. Zero is 2s; ignored outside Cluster mode.
	ClusterRefreshInterval units.Duration `yaml:"cluster_refresh_interval"`
	// DefaultTTL is the lifetime of entries stored with a ttl of zero. Zero is the
	// memory block's default_ttl when built by New, 1h otherwise.
	DefaultTTL units.Duration `yaml:"default_ttl"`
}

// Defaults of RedisConfig.
const (
	DefaultKeyPrefix              = "factgate:v1:"
	DefaultRedisTimeout           = units.Duration(500 * time.Millisecond)
	DefaultClusterRefreshInterval = units.Duration(2 * time.Second)
)

// Validate reports a contradictory or impossible block without touching the network
// or the environment.
func (c RedisConfig) Validate() error {
	switch {
	case c.URL == "" && len(c.Addrs) == 0:
		return errors.New("cache.redis: give url or addrs")
	case c.URL != "" && len(c.Addrs) > 0:
		return errors.New("cache.redis: give url or addrs, not both")
	case c.Password != "" && c.PasswordEnv != "":
		return errors.New("cache.redis: give password or password_env, not both")
	case strings.ContainsAny(c.KeyPrefix, "{}"):
		return fmt.Errorf("cache.redis.key_prefix %q: braces would become the cluster hash tag", c.KeyPrefix)
	case c.DB < 0:
		return fmt.Errorf("cache.redis.db: %d is negative", c.DB)
	case c.DB != 0 && c.isCluster():
		return fmt.Errorf("cache.redis.db: %d, but Redis Cluster has only database 0", c.DB)
	case c.PoolSize < 0:
		return fmt.Errorf("cache.redis.pool_size: %d is negative", c.PoolSize)
	case c.ClusterRefreshInterval < 0:
		return fmt.Errorf("cache.redis.cluster_refresh_interval: %s is negative", c.ClusterRefreshInterval)
	}
	for i, addr := range c.Addrs {
		if strings.TrimSpace(addr) == "" || !strings.Contains(addr, ":") {
			return fmt.Errorf("cache.redis.addrs[%d] %q: want host:port", i, addr)
		}
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			return fmt.Errorf("cache.redis.url %q: want redis://host:port/db or rediss://...", redactURL(c.URL))
		}
		if _, err := redis.ParseURL(c.URL); err != nil {
			return fmt.Errorf("cache.redis.url %q: %w", redactURL(c.URL), err)
		}
	}
	return nil
}

func (c RedisConfig) isCluster() bool {
	return c.MasterName == "" && (c.Cluster || len(c.Addrs) > 1)
}

// mode names the topology for logs and errors.
func (c RedisConfig) mode() string {
	switch {
	case c.MasterName != "":
		return "sentinel"
	case c.isCluster():
		return "cluster"
	default:
		return "single"
	}
}

// callTimeout returns the bound of one call: CallTimeout, else ReadTimeout, else
// the default.
func (c RedisConfig) callTimeout() time.Duration {
	switch {
	case c.CallTimeout > 0:
		return c.CallTimeout.Std()
	case c.ReadTimeout > 0:
		return c.ReadTimeout.Std()
	default:
		return DefaultRedisTimeout.Std()
	}
}

// options builds the go-redis options, reading the password from the environment.
func (c RedisConfig) options() (*redis.UniversalOptions, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	timeout := func(d units.Duration) time.Duration {
		if d == 0 {
			d = DefaultRedisTimeout
		}
		return d.Std()
	}
	opts := &redis.UniversalOptions{
		Addrs:         c.Addrs,
		MasterName:    c.MasterName,
		IsClusterMode: c.Cluster && c.MasterName == "",
		Username:      c.Username,
		Password:      c.Password,
		DB:            c.DB,
		DialTimeout:   timeout(c.DialTimeout),
		ReadTimeout:   timeout(c.ReadTimeout),
		WriteTimeout:  timeout(c.WriteTimeout),
		PoolSize:      c.PoolSize,
		// The caller's deadline bounds a command too, not only the socket timeouts.
		ContextTimeoutEnabled: true,
		// One retry re-dials after Redis restarted under pooled connections; more
		// would multiply the stall a dead Redis costs. Likewise one dial attempt per
		// connection: Tiered has its own backoff and probe.
		MaxRetries:    1,
		DialerRetries: 1,
		// A dead Redis must not hold a request waiting for a pooled connection. Every
		// call also carries a deadline of CallTimeout (Redis.bound), which caps the
		// pool wait, the dial, both attempts and the backoff together: without it a
		// hung Redis cost PoolTimeout + two read timeouts + backoff, 2.6s at the
		// defaults.
		PoolTimeout: timeout(c.ReadTimeout) + timeout(c.DialTimeout),
	}
	if c.URL != "" {
		parsed, err := redis.ParseURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("cache.redis.url %q: %w", redactURL(c.URL), err)
		}
		opts.Addrs = []string{parsed.Addr}
		if opts.Username == "" {
			opts.Username = parsed.Username
		}
		if opts.Password == "" {
			opts.Password = parsed.Password
		}
		if opts.DB == 0 {
			opts.DB = parsed.DB
		}
		opts.TLSConfig = parsed.TLSConfig
	}
	if c.PasswordEnv != "" {
		password, ok := os.LookupEnv(c.PasswordEnv)
		if !ok || password == "" {
			return nil, fmt.Errorf("cache.redis.password_env: environment variable %s is not set or empty", c.PasswordEnv)
		}
		opts.Password = password
	}
	if c.TLS && opts.TLSConfig == nil {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return opts, nil
}

// redactURL hides a password in a Redis URL for error messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// Redis is the shared Cache on a go-redis UniversalClient (single node, Sentinel or
// Cluster). Every key gets the configured prefix. Its methods return Redis's errors;
// Tiered is the wrapper that turns them into a memory fallback. Status reports
// degraded from the latest call's outcome.
type Redis struct {
	client redis.UniversalClient
	// cluster is client in Cluster mode, nil otherwise.
	cluster    *redis.ClusterClient
	prefix     string
	defaultTTL time.Duration
	// callTimeout bounds each method's whole round trip (RedisConfig.CallTimeout).
	callTimeout time.Duration
	mode        string
	health      health
}

// NewRedis builds the client from cfg and pings it once with a short timeout. It
// fails only on a bad configuration (the error names the field); an unreachable Redis
// is logged, reported by Status as degraded, and retried by every later call, so the
// proxy starts and runs degraded. A nil log discards.
func NewRedis(cfg RedisConfig, log *slog.Logger) (*Redis, error) {
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	routeRedisLogs(log)
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	ttl := cfg.DefaultTTL.Std()
	if ttl == 0 {
		ttl = DefaultTTL.Std()
	}
	r := &Redis{
		prefix:      prefix,
		defaultTTL:  ttl,
		callTimeout: cfg.callTimeout(),
		mode:        cfg.mode(),
	}
	if cfg.isCluster() {
		// Built here rather than by NewUniversalClient: its options have no slot map
		// refresh interval.
		copts := opts.Cluster()
		copts.ClusterStateReloadInterval = cfg.ClusterRefreshInterval.Std()
		if copts.ClusterStateReloadInterval == 0 {
			copts.ClusterStateReloadInterval = DefaultClusterRefreshInterval.Std()
		}
		r.cluster = redis.NewClusterClient(copts)
		r.client = r.cluster
	} else {
		r.client = redis.NewUniversalClient(opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.DialTimeout+opts.ReadTimeout)
	defer cancel()
	if err := r.Ping(ctx); err != nil {
		log.Warn("redis unreachable at start-up; running degraded until it answers",
			"mode", r.mode, "addrs", opts.Addrs, "error", err)
	}
	return r, nil
}

var redisLogsOnce sync.Once

// routeRedisLogs sends go-redis's own log lines (dial failures, which Tiered already
// reports once per outage) to log at debug level instead of plain text on stderr.
// go-redis has one process-wide logger, so the first Redis built sets it.
func routeRedisLogs(log *slog.Logger) {
	redisLogsOnce.Do(func() { redis.SetLogger(redisLogAdapter{log}) })
}

type redisLogAdapter struct{ log *slog.Logger }

func (a redisLogAdapter) Printf(ctx context.Context, format string, v ...any) {
	a.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// bound returns ctx with the call's deadline (callTimeout), so that a hung Redis
// holds no call longer. The caller's own deadline wins when it is earlier. Errors
// are observed against the caller's ctx: a deadline of this bound is Redis's
// failure, the caller's is not.
func (r *Redis) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.callTimeout)
}

// Ping checks that Redis answers: in Cluster mode, every master of the slot map
// (read afresh), since each holds part of the keys.
func (r *Redis) Ping(ctx context.Context) error {
	cctx, cancel := r.bound(ctx)
	defer cancel()
	var err error
	if r.cluster != nil {
		err = r.cluster.ForEachMaster(cctx, func(ctx context.Context, master *redis.Client) error {
			if err := master.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("master %s: %w", master.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = r.client.Ping(cctx).Err()
	}
	return r.wrap("ping", "", r.observe(ctx, err, "ping"))
}

// sharded reports Cluster mode: a call reaches the one master of its key's slot,
// so its success says nothing of the other masters (Tiered).
func (r *Redis) sharded() bool { return r.cluster != nil }

// Get returns the value under key.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	cctx, cancel := r.bound(ctx)
	defer cancel()
	value, err := r.client.Get(cctx, r.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		r.health.succeed()
		return nil, false, nil
	}
	if err = r.observe(ctx, err, "get"); err != nil {
		return nil, false, r.wrap("get", key, err)
	}
	return value, true, nil
}

// Set stores value under key for ttl (zero or negative: the default TTL).
func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	cctx, cancel := r.bound(ctx)
	defer cancel()
	err := r.client.Set(cctx, r.prefix+key, value, r.ttl(ttl)).Err()
	return r.wrap("set", key, r.observe(ctx, err, "set"))
}

// Delete removes key.
func (r *Redis) Delete(ctx context.Context, key string) error {
	cctx, cancel := r.bound(ctx)
	defer cancel()
	err := r.client.Del(cctx, r.prefix+key).Err()
	return r.wrap("delete", key, r.observe(ctx, err, "delete"))
}

// SetAdd adds member to the set under key and resets its ttl, in one MULTI/EXEC.
func (r *Redis) SetAdd(ctx context.Context, key, member string, ttl time.Duration) error {
	return r.addMembers(ctx, key, []string{member}, ttl)
}

// addMembers is SADD of every member and PEXPIRE in one MULTI/EXEC.
func (r *Redis) addMembers(ctx context.Context, key string, members []string, ttl time.Duration) error {
	full := r.prefix + key
	args := make([]any, len(members))
	for i, member := range members {
		args[i] = member
	}
	cctx, cancel := r.bound(ctx)
	defer cancel()
	_, err := r.client.TxPipelined(cctx, func(pipe redis.Pipeliner) error {
		pipe.SAdd(cctx, full, args...)
		pipe.PExpire(cctx, full, r.ttl(ttl))
		return nil
	})
	return r.wrap("set_add", key, r.observe(ctx, err, "set_add"))
}

// SetMembers returns the set's members, sorted; an absent set has none (nil).
func (r *Redis) SetMembers(ctx context.Context, key string) ([]string, error) {
	cctx, cancel := r.bound(ctx)
	defer cancel()
	members, err := r.client.SMembers(cctx, r.prefix+key).Result()
	if err = r.observe(ctx, err, "set_members"); err != nil {
		return nil, r.wrap("set_members", key, err)
	}
	return sortedOrNil(members), nil
}

// membersWithTTL is SMEMBERS and PTTL in one round trip; ttl is zero when the set has
// no expiry or does not exist.
func (r *Redis) membersWithTTL(ctx context.Context, key string) ([]string, time.Duration, error) {
	full := r.prefix + key
	var members *redis.StringSliceCmd
	var ttl *redis.DurationCmd
	cctx, cancel := r.bound(ctx)
	defer cancel()
	_, err := r.client.Pipelined(cctx, func(pipe redis.Pipeliner) error {
		members = pipe.SMembers(cctx, full)
		ttl = pipe.PTTL(cctx, full)
		return nil
	})
	if err = r.observe(ctx, err, "set_members"); err != nil {
		return nil, 0, r.wrap("set_members", key, err)
	}
	return sortedOrNil(members.Val()), max(ttl.Val(), 0), nil
}

// HashIncr adds each delta to its counter with HINCRBY and resets the hash's ttl, all
// in one MULTI/EXEC, so the counters and their ttl change together. No deltas change
// nothing.
func (r *Redis) HashIncr(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) error {
	if len(deltas) == 0 {
		return nil
	}
	full := r.prefix + key
	cctx, cancel := r.bound(ctx)
	defer cancel()
	_, err := r.client.TxPipelined(cctx, func(pipe redis.Pipeliner) error {
		for field, delta := range deltas {
			pipe.HIncrBy(cctx, full, field, delta)
		}
		pipe.PExpire(cctx, full, r.ttl(ttl))
		return nil
	})
	return r.wrap("hash_incr", key, r.observe(ctx, err, "hash_incr"))
}

// HashIncrGetAll adds each delta with HINCRBY, resets the hash's ttl and reads
// every counter with HGETALL, all in one MULTI/EXEC: no other client's increment
// falls between the two.
func (r *Redis) HashIncrGetAll(ctx context.Context, key string, deltas map[string]int64, ttl time.Duration) (map[string]int64, error) {
	full := r.prefix + key
	var all *redis.MapStringStringCmd
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for field, delta := range deltas {
			pipe.HIncrBy(ctx, full, field, delta)
		}
		pipe.PExpire(ctx, full, r.ttl(ttl))
		all = pipe.HGetAll(ctx, full)
		return nil
	})
	if err = r.observe(ctx, err, "hash_incr"); err != nil {
		return nil, r.wrap("hash_incr", key, err)
	}
	return parseCounters(key, all.Val())
}

// HashGetAll returns every counter of the hash under key; an absent hash has none.
func (r *Redis) HashGetAll(ctx context.Context, key string) (map[string]int64, error) {
	cctx, cancel := r.bound(ctx)
	defer cancel()
	raw, err := r.client.HGetAll(cctx, r.prefix+key).Result()
	if err = r.observe(ctx, err, "hash_get_all"); err != nil {
		return nil, r.wrap("hash_get_all", key, err)
	}
	return parseCounters(key, raw)
}

// countersWithTTL is HGETALL and PTTL in one round trip; ttl is zero when the hash
// has no expiry or does not exist.
func (r *Redis) countersWithTTL(ctx context.Context, key string) (map[string]int64, time.Duration, error) {
	full := r.prefix + key
	var raw *redis.MapStringStringCmd
	var ttl *redis.DurationCmd
	cctx, cancel := r.bound(ctx)
	defer cancel()
	_, err := r.client.Pipelined(cctx, func(pipe redis.Pipeliner) error {
		raw = pipe.HGetAll(cctx, full)
		ttl = pipe.PTTL(cctx, full)
		return nil
	})
	if err = r.observe(ctx, err, "hash_get_all"); err != nil {
		return nil, 0, r.wrap("hash_get_all", key, err)
	}
	counters, err := parseCounters(key, raw.Val())
	return counters, max(ttl.Val(), 0), err
}

func parseCounters(key string, raw map[string]string) (map[string]int64, error) {
	counters := make(map[string]int64, len(raw))
	for field, text := range raw {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cache: redis hash %q field %q holds %q: %w", key, field, text, errNotCounter)
		}
		counters[field] = n
	}
	return counters, nil
}

// Status reports "redis", degraded while the latest call failed.
func (r *Redis) Status() Status { return r.health.status("redis") }

// Close closes the client's connections.
func (r *Redis) Close() error { return r.client.Close() }

func (r *Redis) ttl(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return r.defaultTTL
	}
	return ttl
}

// observe records a call's outcome in the health state and returns err. A cancelled
// or expired caller context says nothing about Redis and is not recorded.
func (r *Redis) observe(ctx context.Context, err error, op string) error {
	switch {
	case err == nil:
		r.health.succeed()
	case ctx.Err() != nil, isDataError(err):
	default:
		r.health.fail(r.wrap(op, "", err).Error())
		if r.cluster != nil {
			// The slot's master may have died and its replica taken over: go-redis
			// re-reads the slot map on MOVED, but not when the old master is gone.
			// The reload runs in the background, one at a time.
			r.cluster.ReloadState(context.Background())
		}
	}
	return err
}

// errNotCounter marks a hash field that does not hold an integer.
var errNotCounter = errors.New("not a counter")

// isDataError reports an error about what a key holds (a set read as a value, a
// counter that is not a number): Redis is up, the caller or another program misused
// the key, so it says nothing about Redis's health.
func isDataError(err error) bool {
	var reply redis.Error
	return errors.Is(err, errNotCounter) ||
		(errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "WRONGTYPE"))
}

func (r *Redis) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if key == "" {
		return fmt.Errorf("cache: redis %s: %w", op, err)
	}
	return fmt.Errorf("cache: redis %s %q: %w", op, key, err)
}

func sortedOrNil(members []string) []string {
	if len(members) == 0 {
		return nil
	}
	slices.Sort(members)
	return members
}

var _ Cache = (*Redis)(nil)
