package cache

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// Flight makes concurrent requests for the same key build a value once: the first
// caller starts the build and every caller that arrives while it runs waits for the
// same result. Nothing is remembered after the build returns — put the result in a
// cache for that. The zero Flight is ready to use and must not be copied after use.
type Flight[V any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[V]
}

type flightCall[V any] struct {
	done  chan struct{}
	value V
	err   error
	// waiters counts the callers sharing this build, the first included.
	waiters int
}

// Do returns the result of build for key, running build only if no build for key is
// in flight; shared reports whether the result went to more than one caller.
//
// The build runs in its own goroutine with ctx's values but not its cancellation,
// so one caller giving up does not fail the others; a caller whose ctx ends stops
// waiting and gets ctx's error, while the build goes on for the rest. A panic in
// build becomes an error for every waiting caller instead of crashing the process.
func (f *Flight[V]) Do(ctx context.Context, key string, build func(ctx context.Context) (V, error)) (value V, shared bool, err error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = make(map[string]*flightCall[V])
	}
	call, inFlight := f.calls[key]
	if !inFlight {
		call = &flightCall[V]{done: make(chan struct{})}
		f.calls[key] = call
		go f.run(context.WithoutCancel(ctx), key, call, build)
	}
	call.waiters++
	f.mu.Unlock()

	select {
	case <-call.done:
		f.mu.Lock()
		shared = call.waiters > 1
		f.mu.Unlock()
		return call.value, shared, call.err
	case <-ctx.Done():
		var zero V
		return zero, false, ctx.Err()
	}
}

func (f *Flight[V]) run(ctx context.Context, key string, call *flightCall[V], build func(context.Context) (V, error)) {
	defer func() {
		if recovered := recover(); recovered != nil {
			call.err = fmt.Errorf("cache: build for key %q panicked: %v\n%s", key, recovered, debug.Stack())
		}
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(call.done)
	}()
	call.value, call.err = build(ctx)
}

// waiting returns how many callers share the build in flight for key; for tests.
func (f *Flight[V]) waiting(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if call, ok := f.calls[key]; ok {
		return call.waiters
	}
	return 0
}
