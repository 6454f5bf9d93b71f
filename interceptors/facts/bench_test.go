package facts

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time. The benchmarks report it
// per operation ("cpu-ns/op") beside wall time, because the machine they run on is
// shared and wall time then measures the neighbours too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func BenchmarkExtractLarge(b *testing.B) {
	x := ra3(b)
	text := replay(b, "allied_vs_soviet.large.txt")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := x.Extract(text); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

func BenchmarkMatch(b *testing.B) {
	ix := extractReplay(b, "allied_vs_soviet.large.txt")
	items := []Evidence{
		{Type: "power", At: 84 * time.Second, Params: []string{"SpecialPower_PackReplaceSelf", "246"}},
		{Type: "select", At: 362 * time.Second, Params: []string{"733"}},
		{Type: "place", At: 9500 * time.Millisecond, Params: []string{"AlliedPowerPlant", "246", "1204.5,880,12"}},
		{Type: "move", At: 871*time.Second + 10*time.Millisecond, Params: []string{"1.0,2.0,3.0"}},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range items {
			ix.Matches(e, 500*time.Millisecond) // what the validator calls
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/match")
}

func BenchmarkRelevant(b *testing.B) {
	ix := extractReplay(b, "allied_vs_soviet.large.txt")
	b.ReportAllocs()
	for b.Loop() {
		ix.Relevant([]int64{246, 587, 733}, []string{"AlliedBomberAircraft"}, []string{"SpecialPower_UnpackReplaceSelf"}, 40)
	}
}

func BenchmarkMarshalLarge(b *testing.B) {
	ix := extractReplay(b, "allied_vs_soviet.large.txt")
	b.ReportAllocs()
	var n int
	for b.Loop() {
		blob, _ := ix.MarshalBinary()
		n = len(blob)
	}
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkUnmarshalLarge(b *testing.B) {
	blob, _ := extractReplay(b, "allied_vs_soviet.large.txt").MarshalBinary()
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := UnmarshalIndex(blob); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

func BenchmarkSourceKeyLarge(b *testing.B) {
	text := replay(b, "allied_vs_soviet.large.txt")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		SourceKey("v1", text)
	}
}

func BenchmarkMergeSegments(b *testing.B) {
	parts := []*Index{
		extractReplay(b, "allied_vs_soviet.part1.txt"),
		extractReplay(b, "allied_vs_soviet.part2.txt"),
		extractReplay(b, "allied_vs_soviet.part3.txt"),
	}
	b.ReportAllocs()
	for b.Loop() {
		Merge(parts...)
	}
}
