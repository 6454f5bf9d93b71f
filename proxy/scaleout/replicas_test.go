package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/abtest"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/proxy"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// The fleet: one mock upstream (the provider every replica calls) and n factgate
// replicas built from one config, as a Deployment runs them, in this process.

// replicaConfig is every replica's config: a validating RA3 route with the facts
// stage and an A/B experiment, so that a request writes a fact index, a session's
// segment list, a trace and experiment counters. %MOCK% is the mock upstream's URL,
// %CACHE% the cache block.
const replicaConfig = `
server:
  max_request_body: 4MiB
log: {level: info}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 10s}
%CACHE%
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    facts: {}
    validate: {}
    experiment:
      name: replicas
      control: baseline
      variants:
        - {name: baseline, weight: 50}
        - {name: second, weight: 50}
`

// c17Script has the mock answer c17's answer (which cites part 1 of the
// allied_vs_soviet log) to every request.
const c17Script = "default:\n  content_file: testdata/c17_answer.txt\n"

// clientAuth is the Authorization every test client sends: in passthrough mode a
// trace belongs to the credential of its request, so any replica serves it to the
// same credential.
const clientAuth = "Bearer sk-scaleout-client"

// replica is one factgate replica.
type replica struct {
	name  string
	srv   *proxy.Server
	base  string // http://127.0.0.1:PORT
	probe *factsProbe
	logs  *syncBuffer
}

// fleet is the mock upstream and the replicas sharing one cache config.
type fleet struct {
	mock     *mockupstream.Server
	replicas []*replica
}

// startFleet starts the mock upstream and n replicas with cacheBlock; each replica
// serves on its own loopback listener and is shut down when the test ends.
func startFleet(t testing.TB, n int, cacheBlock, script string) *fleet {
	t.Helper()
	sc, err := mockupstream.ParseScript([]byte(script), "scaleout")
	if err != nil {
		t.Fatalf("mock script: %v", err)
	}
	mock := mockupstream.New(mockupstream.Options{Script: sc})
	if err := mock.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	f := &fleet{mock: mock}
	for i := range n {
		f.replicas = append(f.replicas, startReplica(t, string(rune('A'+i)), mock.URL(), cacheBlock))
	}
	return f
}

func startReplica(t testing.TB, name, mockURL, cacheBlock string) *replica {
	t.Helper()
	text := strings.NewReplacer("%MOCK%", mockURL, "%CACHE%", cacheBlock).Replace(replicaConfig)
	cfg, err := proxy.ParseConfig([]byte(text), "replica-"+name+".yaml")
	if err != nil {
		t.Fatalf("replica %s config: %v", name, err)
	}
	cfg.Server.DrainGrace = nil // no load balancer watches a test's replica
	r := &replica{name: name, probe: &factsProbe{seen: map[string]facts.Info{}}, logs: &syncBuffer{}}
	log := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("replica", name)
	r.srv, err = proxy.New(cfg, proxy.WithLogger(log), proxy.WithInnermostStage("ra3", r.probe))
	if err != nil {
		t.Fatalf("replica %s: %v", name, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.srv.Serve(ln) }()
	r.base = "http://" + ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
		if t.Failed() {
			t.Logf("replica %s's log (last 4KiB):\n%s", name, r.logs.tail(4096))
		}
	})
	return r
}

// redisBlock is the cache block of a replica on Redis, where topology is the redis
// block's lines that say where it is (addrs, master_name). The timeouts are
// generous (a loaded machine must not time out a healthy Redis); the probe and the
// backoff are short so that recovery shows within a second, and calls get to try
// Redis between two probes, as with the defaults (2s, 1s).
func redisBlock(topology string) string {
	return `cache:
  redis:
    ` + topology + `
    dial_timeout: 2s
    read_timeout: 2s
    write_timeout: 2s
  tiered:
    probe_interval: 300ms
    error_backoff: 100ms
`
}

// waitReportsCount waits until every replica's A/B report counts sent requests.
func (f *fleet) waitReportsCount(t testing.TB, sent int, when string) {
	t.Helper()
	for _, r := range f.replicas {
		eventually(t, 10*time.Second, "replica "+r.name+"'s A/B report"+when, func() string {
			per, total, err := r.experimentRequests()
			if err != nil {
				return err.Error()
			}
			if total != int64(sent) {
				return fmt.Sprintf("counts %d requests %v, %d were sent", total, per, sent)
			}
			return ""
		})
	}
}

// factsProbe is the innermost stage of every replica's route: its response phase
// runs before validation's, waits for the fact index as the validator does, and
// records what the facts stage resolved, by trace id.
type factsProbe struct {
	mu   sync.Mutex
	seen map[string]facts.Info
}

func (*factsProbe) Name() string { return "scaleout-facts-probe" }

// OnResponse implements interceptors.ResponsePhase.
func (p *factsProbe) OnResponse(_ context.Context, ex *interceptors.Exchange) error {
	_, info, _ := facts.FromExchange(ex)
	var id string
	ex.Trace.Do(func(tr *interceptors.Trace) { id = tr.ID })
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[id] = info
	return nil
}

func (p *factsProbe) info(id string) (facts.Info, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	info, ok := p.seen[id]
	return info, ok
}

// answer is what a replica answered to one chat completion.
type answer struct {
	replica string
	status  int
	body    []byte
	traceID string
	issues  string // X-Factgate-Issues
	info    facts.Info
}

// draftSevere returns the first draft's issue counts at or above WeakEvidence
// ("C1,W1"; "" when none), from X-Factgate-Issues ("draft=C1,E2;final=0").
func (a answer) draftSevere() string {
	draft, _, _ := strings.Cut(strings.TrimPrefix(a.issues, "draft="), ";")
	var out []string
	for _, c := range strings.Split(draft, ",") {
		if c != "0" && c != "" && !strings.HasPrefix(c, "I") {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}

// contradicted reports a Contradiction (or a Fatal) among the first draft's issues.
func (a answer) contradicted() bool {
	draft, _, _ := strings.Cut(strings.TrimPrefix(a.issues, "draft="), ";")
	return strings.Contains(draft, "C") || strings.Contains(draft, "F")
}

func (a answer) String() string {
	return fmt.Sprintf("replica %s: status %d, %s %q, facts %+v", a.replica, a.status, validate.HeaderIssues, a.issues, a.info)
}

// chat sends one chat completion with text as the user message, in session (""
// none), and returns the answer; a transport error is returned, not fatal, so that
// goroutines may call it.
func (r *replica) chat(text, session string) (answer, error) {
	body, _ := json.Marshal(map[string]any{
		"model":    "ra3-analyst",
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	req, err := http.NewRequest("POST", r.base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", clientAuth)
	if session != "" {
		req.Header.Set(reqcontext.HeaderSession, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("replica %s: %w", r.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("replica %s: reading the answer: %w", r.name, err)
	}
	a := answer{replica: r.name, status: resp.StatusCode, body: b,
		traceID: resp.Header.Get("X-Factgate-Trace-Id"), issues: resp.Header.Get(validate.HeaderIssues)}
	a.info, _ = r.probe.info(a.traceID)
	return a, nil
}

// mustChat is chat that fails t unless the replica answered 200.
func (r *replica) mustChat(t testing.TB, text, session string) answer {
	t.Helper()
	a, err := r.chat(text, session)
	if err != nil {
		t.Fatal(err)
	}
	if a.status != 200 {
		t.Fatalf("replica %s answered %d: %s", r.name, a.status, a.body)
	}
	return a
}

// readiness returns /readyz's status ("ready", "degraded") and its cache check.
func (r *replica) readiness() (string, string) {
	resp, err := http.Get(r.base + "/readyz")
	if err != nil {
		return "unreachable: " + err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return gjson.GetBytes(b, "status").Str, gjson.GetBytes(b, "checks.cache").Raw
}

// trace fetches a trace with auth once: the status and the body.
func (r *replica) trace(id, auth string) (int, []byte) {
	req, _ := http.NewRequest("GET", r.base+"/factgate/v1/traces/"+id, nil)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// experimentRequests returns how many requests the A/B report counts, per variant
// and in all.
func (r *replica) experimentRequests() (map[string]int64, int64, error) {
	req, _ := http.NewRequest("GET", r.base+abtest.ReportPath, nil)
	req.Header.Set("Authorization", clientAuth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var rep abtest.Report
	if resp.StatusCode != 200 || json.Unmarshal(b, &rep) != nil || len(rep.Experiments) != 1 {
		return nil, 0, fmt.Errorf("%s on replica %s: %d %s", abtest.ReportPath, r.name, resp.StatusCode, b)
	}
	per := map[string]int64{}
	var total int64
	for _, v := range rep.Experiments[0].Variants {
		per[v.Name] = v.Requests + v.ForcedRequests
		total += per[v.Name]
	}
	return per, total, nil
}

// eventually polls cond every 50ms until it holds or within passes; then it fails
// t with what cond last said. cond returns "" when it holds.
func eventually(t testing.TB, within time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, within, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// part returns part n (1-3) of the allied_vs_soviet log.
func part(t testing.TB, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("allied_vs_soviet.part%d.txt", n)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// followUp is a question in a session without a log of its own: it is checked
// against the session's merged segments.
const followUp = "继续：246 后来怎样了？"

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// count returns how many times substr occurs in what was written so far.
func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Count(s.b.Bytes(), []byte(substr))
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
