package cache

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Config is the cache block of factgate's configuration:
//
//	cache:
//	  memory: {max_bytes: 16MiB, max_entries: 100000, default_ttl: 1h}
//	  redis:  {addrs: ["127.0.0.1:6379"], password_env: FACTGATE_REDIS_PASSWORD}
//	  tiered: {local_ttl: 30s, probe_interval: 2s, error_backoff: 1s}
//
// The zero Config is a memory-only cache with the defaults.
type Config struct {
	// Memory bounds the in-process cache, used alone or in front of Redis.
	Memory MemoryConfig `yaml:"memory"`
	// Redis configures the shared cache; nil (absent) means memory only.
	Redis *RedisConfig `yaml:"redis"`
	// Tiered tunes the memory tier in front of Redis; ignored without Redis.
	Tiered TieredConfig `yaml:"tiered"`
}

// Validate reports every impossible or contradictory setting, without touching the
// network or the environment.
func (c Config) Validate() error {
	errs := []error{c.Memory.Validate(), c.Tiered.Validate()}
	if c.Redis != nil {
		errs = append(errs, c.Redis.Validate())
	}
	return errors.Join(errs...)
}

// New builds the cache cfg describes: Memory without a redis block, otherwise Tiered
// (memory in front of Redis). It fails only on a bad configuration, naming the field;
// an unreachable Redis is not an error — the cache starts degraded and recovers when
// Redis answers. reg receives the cache's metrics (nil: none registered); a nil log
// discards. The caller closes the cache.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	memory := NewMemory(cfg.Memory)
	if err := RegisterMemoryMetrics(reg, memory, "cache"); err != nil {
		return nil, err
	}
	if cfg.Redis == nil {
		return memory, nil
	}
	redisCfg := *cfg.Redis
	if redisCfg.DefaultTTL == 0 {
		redisCfg.DefaultTTL = cfg.Memory.withDefaults().DefaultTTL
	}
	remote, err := NewRedis(redisCfg, log)
	if err != nil {
		return nil, err
	}
	tiered, err := NewTiered(memory, remote, cfg.Tiered, reg, log)
	if err != nil {
		_ = remote.Close()
		return nil, err
	}
	return tiered, nil
}

// memoryCollector exports a Memory's LRU statistics at scrape time.
type memoryCollector struct {
	memory                                  *Memory
	entries, bytes, hits, misses, evictions *prometheus.Desc
}

// RegisterMemoryMetrics exports memory's statistics on reg (nil: nothing) as
// factgate_<name>_memory_{entries,bytes,hits_total,misses_total,evictions_total}:
// "cache" for the cache's own memory tier, "traces" for the trace store's. When
// metrics of that name are already registered (a second cache on one registry),
// the first stays.
func RegisterMemoryMetrics(reg prometheus.Registerer, memory *Memory, name string) error {
	if reg == nil {
		return nil
	}
	prefix := "factgate_" + name + "_memory_"
	c := &memoryCollector{
		memory:    memory,
		entries:   prometheus.NewDesc(prefix+"entries", "Keys held by the in-process "+name+" memory tier.", nil, nil),
		bytes:     prometheus.NewDesc(prefix+"bytes", "Bytes the in-process "+name+" memory tier accounts for against its byte bound.", nil, nil),
		hits:      prometheus.NewDesc(prefix+"hits_total", "Reads of the in-process "+name+" memory tier that found a live entry.", nil, nil),
		misses:    prometheus.NewDesc(prefix+"misses_total", "Reads of the in-process "+name+" memory tier that found nothing or an expired entry.", nil, nil),
		evictions: prometheus.NewDesc(prefix+"evictions_total", "Entries the in-process "+name+" memory tier evicted to respect its bounds.", nil, nil),
	}
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			return nil // another cache on the same registry reports its memory tier
		}
		return fmt.Errorf("cache: registering memory metrics: %w", err)
	}
	return nil
}

// Describe sends the metric descriptions.
func (c *memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.bytes
	ch <- c.hits
	ch <- c.misses
	ch <- c.evictions
}

// Collect sends the current statistics.
func (c *memoryCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.memory.Stats()
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(s.Evictions))
}
