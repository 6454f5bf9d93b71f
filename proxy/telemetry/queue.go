package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Batching is how ended spans are exported. Each field has the OTEL_BSP_*
// variable of the OpenTelemetry SDK's batch span processor, with its default.
type Batching struct {
	// QueueSize bounds the spans waiting for export (OTEL_BSP_MAX_QUEUE_SIZE,
	// 2048). A span that finds the queue full is dropped.
	QueueSize int
	// BatchSize is the most spans one export carries
	// (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512).
	BatchSize int
	// Delay is the longest a span waits for its batch to fill
	// (OTEL_BSP_SCHEDULE_DELAY, 5000 ms).
	Delay time.Duration
	// ExportTimeout bounds one export, its retries included
	// (OTEL_BSP_EXPORT_TIMEOUT, 30000 ms). A batch not exported by then is
	// dropped.
	ExportTimeout time.Duration
}

// The bounds of the OTLP exporters' retries of a failing collector, inside the
// export timeout.
const (
	retryInitial = 500 * time.Millisecond
	retryMax     = 2 * time.Second
	retryElapsed = 10 * time.Second
)

// batchingFromEnv reads the OTEL_BSP_* variables; a value that is not a positive
// integer is an error naming the variable.
func batchingFromEnv() (Batching, error) {
	b := Batching{QueueSize: 2048, BatchSize: 512, Delay: 5 * time.Second, ExportTimeout: 30 * time.Second}
	for _, v := range []struct {
		name string
		set  func(n int)
	}{
		{"OTEL_BSP_MAX_QUEUE_SIZE", func(n int) { b.QueueSize = n }},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", func(n int) { b.BatchSize = n }},
		{"OTEL_BSP_SCHEDULE_DELAY", func(n int) { b.Delay = time.Duration(n) * time.Millisecond }},
		{"OTEL_BSP_EXPORT_TIMEOUT", func(n int) { b.ExportTimeout = time.Duration(n) * time.Millisecond }},
	} {
		s := strings.TrimSpace(os.Getenv(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return b, fmt.Errorf("%s=%q: a positive integer", v.name, s)
		}
		v.set(n)
	}
	return b, nil
}

// The reasons a span is dropped (factgate_telemetry_spans_dropped_total).
const (
	dropQueueFull    = "queue_full"    // the queue was full when the span ended
	dropExportFailed = "export_failed" // its batch's export failed or timed out
	dropShutdown     = "shutdown"      // not exported before the shutdown deadline
)

// exportQueue is the span processor: an ended span goes into a bounded queue,
// without waiting — a full queue drops it —, and one goroutine exports the queue
// in batches. The queue is a slice behind a mutex rather than a channel: the
// goroutine is woken when a batch is full or the delay has passed, not for every
// span (a wake-up a span cost as much as encoding it). A batch whose export fails (the collector is down or slow) is
// dropped: the queue carries on with the next, so that a collector that comes
// back gets the spans from then on. Every dropped span is counted.
type exportQueue struct {
	exporter sdktrace.SpanExporter
	b        Batching
	// mu guards pending, the spans waiting (at most b.QueueSize).
	mu      sync.Mutex
	pending []spanData
	// batch is the spans being exported.
	batch []spanData
	// full wakes the goroutine: pending holds a batch.
	full    chan struct{}
	flush   chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
	once    sync.Once
	// runCtx is cancelled when the shutdown deadline passes: the export in
	// flight then gives up.
	runCtx    context.Context
	cancelRun context.CancelFunc
	log       *slog.Logger

	exported prometheus.Counter
	dropped  map[string]prometheus.Counter
	// readOnly is a batch as the SDK's spans, for an exporter other than
	// spanExporter.
	readOnly []sdktrace.ReadOnlySpan
	// failing: the last export failed (its log line is written once, and the
	// recovery's once).
	failing bool
}

func newExportQueue(exp sdktrace.SpanExporter, b Batching, reg prometheus.Registerer, log *slog.Logger) (*exportQueue, error) {
	if b.QueueSize <= 0 || b.BatchSize <= 0 || b.Delay <= 0 || b.ExportTimeout <= 0 {
		return nil, fmt.Errorf("telemetry batching: every bound must be positive (%+v)", b)
	}
	b.BatchSize = min(b.BatchSize, b.QueueSize)
	q := &exportQueue{
		exporter: exp,
		b:        b,
		pending:  make([]spanData, 0, min(b.QueueSize, 4096)),
		batch:    make([]spanData, 0, b.BatchSize),
		full:     make(chan struct{}, 1),
		flush:    make(chan chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		log:      log,
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "factgate_telemetry_spans_exported_total", Help: "OpenTelemetry spans the collector accepted.",
		}),
		dropped: map[string]prometheus.Counter{},
	}
	if q.log == nil {
		q.log = slog.New(slog.DiscardHandler)
	}
	droppedVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "factgate_telemetry_spans_dropped_total",
		Help: "OpenTelemetry spans dropped, by reason: queue_full (the export queue was full: the collector is slow or down), export_failed (the collector refused the batch or did not answer in time), shutdown (not exported by the shutdown deadline).",
	}, []string{"reason"})
	for _, r := range []string{dropQueueFull, dropExportFailed, dropShutdown} {
		q.dropped[r] = droppedVec.WithLabelValues(r)
	}
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "factgate_telemetry_queue_spans", Help: "OpenTelemetry spans waiting in the export queue.",
	}, func() float64 { return float64(q.waiting()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{q.exported, droppedVec, queued} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("telemetry metrics: %w", err)
			}
		}
	}
	q.runCtx, q.cancelRun = context.WithCancel(context.Background())
	go q.run()
	return q, nil
}

// OnStart implements sdktrace.SpanProcessor.
func (q *exportQueue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: it queues the span, or drops it.
func (q *exportQueue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	q.add(s)
}

// add queues a sampled span that ended, or drops it.
func (q *exportQueue) add(s spanData) {
	reason := dropShutdown
	if !q.stopped.Load() {
		q.mu.Lock()
		if n := len(q.pending); n < q.b.QueueSize {
			q.pending = append(q.pending, s)
			q.mu.Unlock()
			if (n+1)%q.b.BatchSize == 0 {
				select {
				case q.full <- struct{}{}:
				default: // already woken
				}
			}
			return
		}
		q.mu.Unlock()
		reason = dropQueueFull
	}
	q.dropped[reason].Inc()
	if own, ok := s.(*span); ok {
		own.release()
	}
}

// waiting is the number of spans in the queue.
func (q *exportQueue) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

func (q *exportQueue) run() {
	defer close(q.done)
	timer := time.NewTimer(q.b.Delay)
	defer timer.Stop()
	for {
		select {
		case <-q.full:
		case <-timer.C:
		case reply := <-q.flush:
			q.exportPending()
			close(reply)
			continue
		case <-q.stop:
			q.exportPending()
			return
		}
		q.exportPending()
		timer.Reset(q.b.Delay)
	}
}

// exportPending exports the spans queued now, batch by batch. The queue keeps
// what waits for the next batch: the spans held are at most the queue's size
// and the batch being exported, as with the SDK's batch span processor.
func (q *exportQueue) exportPending() {
	for left := q.waiting(); left > 0; {
		q.mu.Lock()
		k := min(len(q.pending), q.b.BatchSize)
		q.batch = append(q.batch[:0], q.pending[:k]...)
		n := copy(q.pending, q.pending[k:])
		clear(q.pending[n:])
		q.pending = q.pending[:n]
		q.mu.Unlock()
		if k == 0 {
			return
		}
		q.export(q.batch)
		clear(q.batch)
		left -= k
	}
}

// export sends batch.
func (q *exportQueue) export(batch []spanData) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(q.runCtx, q.b.ExportTimeout)
	var err error
	if x, ok := q.exporter.(dataExporter); ok {
		err = x.exportData(ctx, batch)
	} else {
		// Another exporter (http/json, a test's) keeps what it is given.
		q.readOnly = q.readOnly[:0]
		for _, s := range batch {
			q.readOnly = append(q.readOnly, readOnly(s))
		}
		err = q.exporter.ExportSpans(ctx, q.readOnly)
		clear(q.readOnly)
	}
	cancel()
	n := float64(len(batch))
	switch {
	case err == nil:
		q.exported.Add(n)
		if q.failing {
			q.failing = false
			q.log.Info("telemetry: the collector accepts spans again")
		}
	case q.runCtx.Err() != nil:
		q.dropped[dropShutdown].Add(n)
	default:
		q.dropped[dropExportFailed].Add(n)
		if !q.failing {
			q.failing = true
			q.log.Warn("telemetry: exporting spans failed; spans are dropped (factgate_telemetry_spans_dropped_total) until the collector accepts them again",
				"spans", len(batch), "error", err.Error())
		}
	}
}

// ForceFlush implements sdktrace.SpanProcessor: it exports what is queued.
func (q *exportQueue) ForceFlush(ctx context.Context) error {
	reply := make(chan struct{})
	select {
	case q.flush <- reply:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown implements sdktrace.SpanProcessor: spans ending from now on are
// dropped; those queued are exported within ctx, the rest counted as dropped.
// Then the exporter shuts down.
func (q *exportQueue) Shutdown(ctx context.Context) error {
	var err error
	q.once.Do(func() {
		q.stopped.Store(true)
		stopRun := context.AfterFunc(ctx, q.cancelRun)
		defer stopRun()
		close(q.stop)
		select {
		case <-q.done:
		case <-ctx.Done():
			err = fmt.Errorf("telemetry: spans not exported by the shutdown deadline: %w", ctx.Err())
			q.cancelRun()
			<-q.done // the export in flight gives up at once
		}
		// Spans that ended as the queue stopped.
		q.mu.Lock()
		left := q.pending
		q.pending = nil
		q.mu.Unlock()
		if len(left) > 0 {
			q.dropped[dropShutdown].Add(float64(len(left)))
		}
		for _, s := range left {
			if own, ok := s.(*span); ok {
				own.release()
			}
		}
		if serr := q.exporter.Shutdown(ctx); serr != nil && err == nil {
			err = fmt.Errorf("telemetry: stopping the exporter: %w", serr)
		}
		q.cancelRun()
	})
	return err
}

var _ sdktrace.SpanProcessor = (*exportQueue)(nil)
