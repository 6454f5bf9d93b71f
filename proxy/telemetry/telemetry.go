// Package telemetry exports factgate's OpenTelemetry traces: every proxied request
// a server span, every upstream call under it a client span in the GenAI semantic
// conventions (gen_ai.*), every try of that call (retries, fallbacks) an HTTP
// client span under the call, with W3C trace context taken from the client and
// passed on to the upstream. It is configured by the standard OTEL_* environment
// variables and the telemetry block of the config (Config) for what they do not
// cover.
//
// Off (the default) there is no Telemetry: New returns nil, and every method of a
// nil *Telemetry, *Request, *Call and *Try does nothing, so the proxy's hooks cost
// a nil check. On, spans end in a bounded queue that one goroutine exports in
// batches: a request never waits for the collector; a full queue or a failed
// export drops spans, counted in factgate_telemetry_spans_dropped_total.
//
// The proxy calls the hooks; a stage (interceptors/...) reaches the request's
// span through the context of its phases, with the OpenTelemetry trace API
// (interceptors.StartSpan). The hooks' spans are factgate's own (span.go), the
// stages' the SDK's; over the protobuf protocols both are encoded as OTLP by
// otlp.go and sent with the OpenTelemetry OTLP clients (docs/performance.md,
// "Tracing", says what each saves).
package telemetry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Config is the telemetry block: what the OTEL_* environment variables do not
// say. Where the spans go, the service name, the sampler, the resource, the
// batching are the environment's (see docs/observability.md).
type Config struct {
	// Enabled turns tracing on. Default false: no spans, no exporter, no cost.
	// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off again.
	Enabled bool `yaml:"enabled"`
	// Content records message content on the spans, as the GenAI conventions'
	// opt-in attributes gen_ai.input.messages, gen_ai.output.messages and
	// gen_ai.system_instructions: the client's messages, the injected knowledge,
	// the revision prompts and every answer. Default: off, unless
	// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true. Content is
	// never exported without one of the two.
	Content *bool `yaml:"content"`
	// Providers sets gen_ai.provider.name per upstream (by the upstream's name
	// in upstreams). Default "openai": factgate speaks the OpenAI API to every
	// upstream, and its spans carry openai.* attributes; server.address names
	// the host that served.
	Providers map[string]string `yaml:"providers"`
}

// Validate checks the block against the configured upstreams.
func (c *Config) Validate(upstreams map[string]bool) error {
	var errs []error
	for name, p := range c.Providers {
		if !upstreams[name] {
			errs = append(errs, fmt.Errorf("telemetry.providers: %q is not an upstream", name))
		}
		if strings.TrimSpace(p) == "" {
			errs = append(errs, fmt.Errorf("telemetry.providers.%s: empty provider name", name))
		}
	}
	return errors.Join(errs...)
}

// Telemetry is the tracer of one proxy. Nil when tracing is off.
type Telemetry struct {
	provider *sdktrace.TracerProvider
	// sampler, limits, resource and scope are the provider's, for the spans
	// factgate records itself (span); normalizer is a tracer of the same limits
	// that exports nothing, whose spans apply the limits (span.normalize).
	sampler    sdktrace.Sampler
	limits     sdktrace.SpanLimits
	resource   *resource.Resource
	scope      instrumentation.Scope
	normalizer trace.Tracer
	prop       propagation.TraceContext
	queue      *exportQueue
	content    bool
	providers  map[string]string
	log        *slog.Logger
	// parentBased: the sampler follows a remote parent's decision.
	parentBased bool
}

// Option changes how New builds the tracer (tests and embedders).
type Option func(*options)

type options struct {
	exporter sdktrace.SpanExporter
	batching *Batching
	sampler  sdktrace.Sampler
}

// WithExporter exports to e instead of the OTLP exporter the environment
// describes.
func WithExporter(e sdktrace.SpanExporter) Option { return func(o *options) { o.exporter = e } }

// WithBatching replaces the batching the OTEL_BSP_* variables set.
func WithBatching(b Batching) Option { return func(o *options) { o.batching = &b } }

// WithSampler replaces the sampler OTEL_TRACES_SAMPLER sets.
func WithSampler(s sdktrace.Sampler) Option { return func(o *options) { o.sampler = s } }

// Instrumentation scope of factgate's own spans.
const scopeName = "github.com/factgate/factgate/proxy"

// New builds the tracer the block and the environment describe; nil (and no
// error) when tracing is off. Its metrics go to reg. An error names the setting
// at fault.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger, opts ...Option) (*Telemetry, error) {
	if !cfg.Enabled || envTrue("OTEL_SDK_DISABLED") {
		return nil, nil
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	exp := o.exporter
	if exp == nil {
		switch v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v {
		case "", "otlp":
		case "none":
			return nil, nil
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: factgate exports traces with otlp (or none)", v)
		}
		var err error
		if exp, err = otlpExporter(); err != nil {
			return nil, err
		}
	}
	batching := o.batching
	if batching == nil {
		b, err := batchingFromEnv()
		if err != nil {
			return nil, err
		}
		batching = &b
	}
	sampler := o.sampler
	if sampler == nil {
		s, err := samplerFromEnv()
		if err != nil {
			return nil, err
		}
		sampler = s
	}
	parentBased := strings.HasPrefix(sampler.Description(), "ParentBased")
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceName("factgate"), semconv.ServiceVersion(version())),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: after, so they win
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	q, err := newExportQueue(exp, *batching, reg, log)
	if err != nil {
		return nil, err
	}
	limits := sdktrace.NewSpanLimits() // the OTEL_SPAN_* variables, as the provider reads them
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
		sdktrace.WithIDGenerator(randomIDs{}),
		sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithSpanProcessor(q),
	)
	// The resource and scope of the provider's spans, read off a span of a
	// provider that exports nothing.
	norm := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithRawSpanLimits(limits))
	_, probe := norm.Tracer(scopeName).Start(context.Background(), "")
	ro := probe.(sdktrace.ReadOnlySpan)
	content := false
	if cfg.Content != nil {
		content = *cfg.Content
	} else {
		content = envTrue("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
	}
	return &Telemetry{
		provider:   tp,
		sampler:    sampler,
		limits:     limits,
		resource:   ro.Resource(),
		scope:      ro.InstrumentationScope(),
		normalizer: norm.Tracer(""),
		queue:      q,
		content:    content,
		providers:  cfg.Providers,
		log:        log,

		parentBased: parentBased,
	}, nil
}

// Shutdown exports the spans still queued, within ctx, and stops the exporter.
// Spans it could not export by then are counted as dropped (reason shutdown).
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// ForceFlush exports the spans queued so far, within ctx.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Content reports whether message content is recorded.
func (t *Telemetry) Content() bool { return t != nil && t.content }

// provider is gen_ai.provider.name for the upstream named up.
func (t *Telemetry) providerName(up string) string {
	if p, ok := t.providers[up]; ok {
		return p
	}
	return "openai"
}

// otlpExporter is the OTLP exporter OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL names:
// http/protobuf (the default), http/json or grpc. The exporters read the
// endpoint, headers, timeout, compression and TLS settings from the environment
// themselves. Their retries of a failing collector are bounded by the export
// timeout (OTEL_BSP_EXPORT_TIMEOUT). The protobuf protocols encode the spans
// with spanExporter and send them with the OpenTelemetry OTLP clients; http/json
// is the OpenTelemetry exporter.
func otlpExporter() (sdktrace.SpanExporter, error) {
	name, protocol := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		name, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	ctx := context.Background()
	httpRetry := otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true,
		InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: retryElapsed})
	switch protocol {
	case "", "http/protobuf":
		return newSpanExporter(ctx, otlptracehttp.NewClient(httpRetry))
	case "http/json":
		return otlptracehttp.New(ctx, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON), httpRetry)
	case "grpc":
		return newSpanExporter(ctx, otlptracegrpc.NewClient(otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true,
			InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: retryElapsed})))
	}
	return nil, fmt.Errorf("%s=%q: use http/protobuf, http/json or grpc", name, protocol)
}

// samplerFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the
// SDK would, but a value it does not know is an error here rather than a log line
// and the default. Unset: parentbased_always_on.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		return sdktrace.TraceIDRatioBased(r), err
	case "parentbased_traceidratio":
		r, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), err
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

func envTrue(name string) bool {
	v, err := strconv.ParseBool(strings.TrimSpace(os.Getenv(name)))
	return err == nil && v
}

var version = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
})

// randomIDs makes trace and span ids from math/rand/v2's generator (ChaCha8,
// seeded from the operating system, per thread: no lock, no system call). The W3C
// trace id of a request factgate starts is also its X-Factgate-Trace-Id, which
// names a trace in factgate's store; the store checks who reads it, the id is no
// secret.
type randomIDs struct{}

func (randomIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.LittleEndian.PutUint64(tid[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomIDs{}.NewSpanID(ctx, tid)
}

func (randomIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.LittleEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
