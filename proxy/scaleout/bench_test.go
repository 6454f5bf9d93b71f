package scaleout

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/interceptors/semantic/eval"
)

// BenchmarkReplicas is the load run through replicas sharing a Redis Cluster,
// against one replica: the same validating traffic (sessions of three segments,
// 60 distinct logs, a trace and experiment counters per request) is sent round-robin
// to one replica on the cluster, to three replicas on the cluster, and, as the
// baseline without Redis, to one replica with the memory cache. It reports
// requests/s and the latency percentiles of each.
//
//	go test ./proxy/scaleout/ -run '^$' -bench Replicas -benchtime 3000x
//
// Every replica runs in this process, so they share its CPUs: on one machine the
// figure shows what sharing the cluster costs, not the capacity that more machines
// add (each replica of a Deployment has its own CPU).
func BenchmarkReplicas(b *testing.B) {
	c := redistest.StartCluster(b, 3, 0)
	logs := make([]string, 60)
	for i := range logs {
		logs[i] = part(b, 1+i%3) + "\n压测 " + strconv.Itoa(i/3)
	}
	for _, tc := range []struct {
		name     string
		replicas int
		block    string
	}{
		{"memory/1-replica", 1, ""},
		{"cluster/1-replica", 1, clusterBlock(c.Addrs())},
		{"cluster/3-replicas", 3, clusterBlock(c.Addrs())},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := startFleet(b, tc.replicas, tc.block, c17Script)
			var next atomic.Int64
			send := func() (time.Duration, error) {
				i := int(next.Add(1))
				r := f.replicas[i%len(f.replicas)]
				start := time.Now()
				// Session s gets logs s, s+20 and s+40: three segments each.
				got, err := r.chat(logs[i%len(logs)], tc.name+"-s"+strconv.Itoa(i%20))
				took := time.Since(start)
				if err == nil && got.status != 200 {
					err = fmt.Errorf("status %d: %.200s", got.status, got.body)
				}
				return took, err
			}
			for range len(logs) { // every index built, every session whole
				if _, err := send(); err != nil {
					b.Fatal(err)
				}
			}
			var mu sync.Mutex
			var latencies []time.Duration
			var failures atomic.Int64
			var firstErr atomic.Value
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					took, err := send()
					if err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					mine = append(mine, took)
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d of %d requests failed; first: %v", n, b.N, firstErr.Load())
			}
			// The one percentile helper (factgate bench and eval use it too).
			pct := func(p float64) float64 {
				return float64(eval.Percentile(latencies, p).Microseconds()) / 1000
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(pct(50), "p50-ms")
			b.ReportMetric(pct(99), "p99-ms")
		})
	}
}
