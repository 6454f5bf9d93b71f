package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/factgate/factgate/cache"
)

// unwrittenKind names what a pending write is, by the namespace of its cache
// key, for the shutdown's log line and factgate_shutdown_unwritten_total.
func unwrittenKind(namespace string) string {
	switch namespace {
	case "experiment", "ratelimit":
		return "counters"
	case "trace":
		return "traces"
	case "facts", "session":
		return "fact_indexes"
	case "console":
		return "sessions"
	}
	return namespace
}

// flushPending writes, at shutdown, what the cache kept while Redis failed
// (A/B and rate limit counters, traces, fact write-backs, console sessions and
// their ends) — at once if Redis answers, else trying again every
// cache.tiered.probe_interval until ctx ends. What it could not write is counted
// in factgate_shutdown_unwritten_total{kind} and logged at WARN with the counts
// by kind, and returned as an error: never a silent loss.
func (s *Server) flushPending(ctx context.Context) error {
	f, ok := s.cache.(cache.Flusher)
	if !ok {
		return nil
	}
	left := f.Flush(ctx)
	if len(left) == 0 {
		return nil
	}
	byKind := map[string]int{}
	for ns, n := range left {
		byKind[unwrittenKind(ns)] += n
	}
	total := 0
	attrs := []any{}
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		n := byKind[kind]
		total += n
		s.metrics.shutdownUnwritten.WithLabelValues(kind).Add(float64(n))
		attrs = append(attrs, slog.Int(kind, n))
		parts = append(parts, fmt.Sprintf("%s %d", kind, n))
	}
	s.log.Warn("shutdown: writes Redis did not take before the shutdown deadline are lost",
		append([]any{"unwritten", total}, append(attrs, "cache", s.cache.Status().LastError)...)...)
	return fmt.Errorf("shutdown: %d writes Redis did not take are lost (%s)", total, strings.Join(parts, ", "))
}
