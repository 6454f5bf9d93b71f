package proxy

import (
	"testing"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
)

// The facts stage's bound reaches the budget through interceptors.MemoryBudgeter.
var _ interceptors.MemoryBudgeter = (*facts.Interceptor)(nil)

// TestMemoryBudget: the budget adds up facts.memory_bytes over the routes with a
// facts stage (and only those), the cache's and the traces' memory tiers and, with
// Redis, the pending writes; /metrics exports each part.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		want   MemoryBudget
	}{
		{
			name: "defaults, one validating route",
			config: `
upstreams: {mock: {base_url: "%MOCK%"}}
routes:
  - {name: ra3, models: [ra3], upstream: mock, pack: ra3, validate: {}}
  - {name: default, default: true, upstream: mock}
`,
			want: MemoryBudget{Facts: 32 << 20, Cache: 16 << 20, Traces: 16 << 20},
		},
		{
			name: "two facts routes, sized tiers, redis",
			config: `
upstreams: {mock: {base_url: "%MOCK%"}}
cache:
  memory: {max_bytes: 64MiB}
  redis: {addrs: ["127.0.0.1:1"], dial_timeout: 50ms, read_timeout: 50ms}
  tiered: {max_pending_bytes: 8MiB}
traces: {memory_bytes: 4MiB}
routes:
  - {name: a, models: [a], upstream: mock, pack: ra3, validate: {}, facts: {memory_bytes: 256MiB}}
  - {name: b, models: [b], upstream: mock, pack: ra3, facts: {}}
  - {name: plain, models: [p], upstream: mock, pack: ra3}
  - {name: default, default: true, upstream: mock}
`,
			want: MemoryBudget{Facts: 256<<20 + 32<<20, Cache: 64 << 20, Traces: 4 << 20, Pending: 8 << 20},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", tt.config)
			got := h.srv.MemoryBudget()
			if got != tt.want {
				t.Fatalf("MemoryBudget = %+v, want %+v", got, tt.want)
			}
			if got.Limit() != got.Budgets()+RuntimeAllowance {
				t.Errorf("Limit %s is not the budgets %s + %s", got.Limit(), got.Budgets(), RuntimeAllowance)
			}
			parts := map[string]units.ByteSize{}
			families, err := h.srv.Metrics().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() != "factgate_memory_budget_bytes" {
					continue
				}
				for _, m := range f.GetMetric() {
					parts[m.GetLabel()[0].GetValue()] = units.ByteSize(m.GetGauge().GetValue())
				}
			}
			want := map[string]units.ByteSize{"facts": tt.want.Facts, "cache": tt.want.Cache, "traces": tt.want.Traces, "pending": tt.want.Pending, "runtime": RuntimeAllowance}
			for part, v := range want {
				if parts[part] != v {
					t.Errorf("factgate_memory_budget_bytes{part=%q} = %s, want %s", part, parts[part], v)
				}
			}
		})
	}
}
