package loadbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/factgate/factgate/interceptors/semantic/eval"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// The ttft mode: time to first token of a streamed request the route's pack is
// not about (a greeting) on the validating route, against the same request sent
// to the mock directly. The proxy relays such a stream live; held, its first
// token would come only once the whole answer is in. The mock paces the answer
// (ttftChunkDelay between events, and as long in all when asked for it whole),
// as a provider generates it.

const (
	// ttftGreeting starts the ttft mode's user message; the mock's ttft rule
	// matches it.
	ttftGreeting = "Say hello"
	// ttftChunkDelay is the mock's wait between the greeting's events: with
	// 16-rune events, about 0.3 s for the whole answer.
	ttftChunkDelay = 20 * time.Millisecond
	// ttftChunkSize is the mock's runes per event (startChildMock's).
	ttftChunkSize = 16
	// ttftConcurrency bounds the mode's concurrency: a stream takes 0.3 s, and
	// the figure is a latency, not a throughput.
	ttftConcurrency = 8
)

// ttftAnswer is the mock's paced greeting (about 200 characters).
func ttftAnswer() *mockupstream.Answer {
	return &mockupstream.Answer{
		Content:    "Hello! This greeting is streamed in small pieces, as a model writes it, so that the time to its first token can be told apart from the time to its last one. Nothing here is an analysis.",
		ChunkDelay: ttftChunkDelay,
		Paced:      true,
		Usage:      &mockupstream.Usage{PromptTokens: 24, CompletionTokens: 48},
	}
}

// ttftBody is the ttft mode's request: a streamed greeting on model.
func ttftBody(model string) []byte {
	return fmt.Appendf(nil, `{"model":%q,"stream":true,"messages":[{"role":"system","content":"You analyse replays."},{"role":"user","content":%q}]}`,
		model, ttftGreeting+", please.")
}

// ttftResult is one measurement of the ttft mode.
type ttftResult struct {
	n, errors  int
	firstErr   string
	first, all []time.Duration // time to the first content, and to the end
}

// driveTTFT sends n streamed requests to t at concurrency c (net/http, reading
// each stream as it arrives) and times their first token and their end.
func driveTTFT(ctx context.Context, t benchTarget, body []byte, n, c int, maxTime time.Duration) ttftResult {
	tr := &http.Transport{MaxIdleConnsPerHost: c, ResponseHeaderTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 40 * time.Second}
	url := "http://" + t.addr + "/v1/chat/completions"
	var next, errs atomic.Int64
	var firstErr atomic.Value
	first, all := make([]time.Duration, n), make([]time.Duration, n)
	deadline := time.Now().Add(maxTime)
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil || time.Now().After(deadline) {
					return
				}
				f, a, err := ttftOnce(ctx, client, url, body)
				first[i], all[i] = f, a
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	done := int(min(next.Load(), int64(n)))
	r := ttftResult{n: done, errors: int(errs.Load()), first: first[:done], all: all[:done]}
	if v, ok := firstErr.Load().(string); ok {
		r.firstErr = v
	}
	return r
}

// ttftOnce sends one streamed request and times its first content event and its
// end.
func ttftOnce(ctx context.Context, client *http.Client, url string, body []byte) (first, all time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(string(body)))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer bench")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, rerr := r.ReadString('\n')
		if first == 0 && strings.HasPrefix(line, "data:") && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			first = time.Since(start)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return first, time.Since(start), rerr
		}
	}
	all = time.Since(start)
	if first == 0 {
		return 0, all, errors.New("the stream carried no content")
	}
	return first, all, nil
}

// runTTFT measures the ttft mode for rounds rounds, alternating which target
// goes first, and prints its table; served counts the proxy's measured requests.
func runTTFT(ctx context.Context, w io.Writer, targets [2]benchTarget, n, c, rounds int, maxTime time.Duration) (served int) {
	c = min(c, ttftConcurrency)
	n = min(n, 25*c)
	body := ttftBody(benchModes["ttft"].model)
	// Warm the connections and pools, unmeasured.
	for _, t := range targets {
		driveTTFT(ctx, t, body, c, c, maxTime)
	}
	var results [2][]ttftResult
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		order := [2]int{0, 1}
		if r%2 == 1 {
			order = [2]int{1, 0}
		}
		for _, i := range order {
			results[i] = append(results[i], driveTTFT(ctx, targets[i], body, n, c, maxTime))
		}
	}
	events := (utf8.RuneCountInString(ttftAnswer().Content)+ttftChunkSize-1)/ttftChunkSize + 3 // role, finish, [DONE]
	fmt.Fprintf(w, "ttft: a streamed greeting (no operation log) on the validating route, %d requests a round at concurrency %d; the mock paces its %d events %s apart\n",
		n, c, events, ttftChunkDelay)
	fmt.Fprintf(w, "%-12s %-7s %s %s %s %7s\n", "mode", "target", padRight("first token p50 [min–max]", 32), padLeft("p99", 9), padLeft("whole p50", 11), "errors")
	var p50s [2][]float64
	for i, t := range targets {
		var p99s, alls []float64
		errs := 0
		firstErr := ""
		for _, r := range results[i] {
			p50s[i] = append(p50s[i], float64(eval.Percentile(r.first, 50)))
			p99s = append(p99s, float64(eval.Percentile(r.first, 99)))
			alls = append(alls, float64(eval.Percentile(r.all, 50)))
			errs += r.errors
			if firstErr == "" {
				firstErr = r.firstErr
			}
		}
		lo, hi := minMax(p50s[i])
		fmt.Fprintf(w, "%-12s %-7s %s %s %s %7d\n", "ttft", t.name,
			padRight(fmt.Sprintf("%s [%s–%s]", fmtLatency(time.Duration(median(p50s[i]))), fmtLatency(time.Duration(lo)), fmtLatency(time.Duration(hi))), 32),
			padLeft(fmtLatency(time.Duration(median(p99s))), 9), padLeft(fmtLatency(time.Duration(median(alls))), 11), errs)
		if firstErr != "" {
			fmt.Fprintf(w, "%-12s first error: %s\n", "", firstErr)
		}
	}
	var diff []float64
	for r := range min(len(p50s[0]), len(p50s[1])) {
		diff = append(diff, p50s[1][r]-p50s[0][r])
	}
	if len(diff) > 0 {
		lo, hi := minMax(diff)
		fmt.Fprintf(w, "%-12s first token through the proxy − direct: p50 %s [%s–%s]\n", "ttft",
			signedLatency(median(diff)), signedLatency(lo), signedLatency(hi))
	}
	for _, r := range results[1] {
		served += r.n
	}
	return served
}

// signedLatency is fmtLatency with its sign.
func signedLatency(ns float64) string {
	if ns < 0 {
		return "−" + fmtLatency(time.Duration(-ns))
	}
	return "+" + fmtLatency(time.Duration(ns))
}
