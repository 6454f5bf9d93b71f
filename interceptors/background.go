package interceptors

import (
	"context"
	"sync"
)

// Wait waits for wg, or for ctx to end first, in which case it returns ctx's
// error (the work goes on; wg is not waited for any more). A stage's Cleanup
// waits for its background writes with it.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
