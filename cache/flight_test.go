package cache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFlightBuildsOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		callers int
		err     error
	}{
		{name: "one caller", callers: 1},
		{name: "many callers share the value", callers: 32},
		{name: "many callers share the error", callers: 8, err: errors.New("log too large")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var f Flight[string]
			var builds atomic.Int32
			release := make(chan struct{})
			build := func(context.Context) (string, error) {
				builds.Add(1)
				<-release
				return "index", tt.err
			}
			var wg sync.WaitGroup
			results := make([]string, tt.callers)
			errs := make([]error, tt.callers)
			shared := make([]bool, tt.callers)
			for i := range tt.callers {
				wg.Go(func() {
					results[i], shared[i], errs[i] = f.Do(context.Background(), "facts:abc", build)
				})
			}
			waitFor(t, "every caller to join the build", func() bool { return f.waiting("facts:abc") == tt.callers })
			close(release)
			wg.Wait()
			if n := builds.Load(); n != 1 {
				t.Fatalf("%d concurrent callers ran %d builds, want 1", tt.callers, n)
			}
			for i := range tt.callers {
				if !errors.Is(errs[i], tt.err) || (tt.err == nil && results[i] != "index") {
					t.Errorf("caller %d got %q, %v", i, results[i], errs[i])
				}
				if shared[i] != (tt.callers > 1) {
					t.Errorf("caller %d shared = %v with %d callers", i, shared[i], tt.callers)
				}
			}
		})
	}
}

func TestFlightForgetsFinishedBuilds(t *testing.T) {
	t.Parallel()
	var f Flight[int]
	var builds atomic.Int32
	build := func(context.Context) (int, error) { return int(builds.Add(1)), nil }
	first, _, _ := f.Do(context.Background(), "k", build)
	second, _, _ := f.Do(context.Background(), "k", build)
	if first != 1 || second != 2 {
		t.Fatalf("sequential calls got %d and %d; each must build anew", first, second)
	}
}

func TestFlightDistinctKeysBuildSeparately(t *testing.T) {
	t.Parallel()
	var f Flight[string]
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, key := range []string{"a", "b"} {
		wg.Go(func() {
			got[i], _, _ = f.Do(context.Background(), key, func(context.Context) (string, error) {
				<-release
				return key, nil
			})
		})
	}
	waitFor(t, "both builds to start", func() bool { return f.waiting("a") == 1 && f.waiting("b") == 1 })
	close(release)
	wg.Wait()
	if got[0] != "a" || got[1] != "b" {
		t.Fatalf("got %q", got)
	}
}

func TestFlightCallerGivesUp(t *testing.T) {
	t.Parallel()
	var f Flight[string]
	release := make(chan struct{})
	build := func(ctx context.Context) (string, error) {
		<-release
		return "index", ctx.Err() // the build must not see the first caller's cancellation
	}
	impatient, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := f.Do(impatient, "k", build)
		done <- err
	}()
	waitFor(t, "the first caller to start the build", func() bool { return f.waiting("k") == 1 })
	patient := make(chan string, 1)
	go func() {
		v, _, err := f.Do(context.Background(), "k", build)
		if err != nil {
			v = err.Error()
		}
		patient <- v
	}()
	waitFor(t, "the second caller to join", func() bool { return f.waiting("k") == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller got %v, want context.Canceled", err)
	}
	close(release)
	if v := <-patient; v != "index" {
		t.Fatalf("the patient caller got %q; one caller giving up must not fail the others", v)
	}
}

func TestFlightPanicBecomesError(t *testing.T) {
	t.Parallel()
	var f Flight[int]
	_, _, err := f.Do(context.Background(), "facts:bad", func(context.Context) (int, error) {
		panic("index out of range")
	})
	if err == nil || !strings.Contains(err.Error(), `build for key "facts:bad" panicked: index out of range`) {
		t.Fatalf("error = %v", err)
	}
	v, _, err := f.Do(context.Background(), "facts:bad", func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("after a panic the key is stuck: %d, %v", v, err)
	}
}
