package facts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// orderRules are fact rules with records only (no ops), as the orders pack
// declares them.
func orderRules() *knowledge.FactRules {
	return &knowledge.FactRules{
		Version: "orders-test/1",
		Records: []knowledge.RecordRule{{
			Set:  "orders",
			From: []string{"user", "tool"},
			Path: "orders",
			Key:  "id",
			Fields: map[string]string{
				"id": "string", "status": "string", "total": "number", "placed": "date",
				"refund": "number", "items": "int", "gift": "bool", "tags": "strings",
			},
		}},
	}
}

func orderExtractor(tb testing.TB) *Extractor {
	tb.Helper()
	x, err := NewExtractor(orderRules())
	if err != nil {
		tb.Fatal(err)
	}
	return x
}

const ordersJSON = `{"customer":"C-7","orders":[
 {"id":"A-1001","status":"shipped","total":59.90,"placed":"2026-03-01","items":2,"gift":false,"tags":["eu","web"]},
 {"id":1002,"status":"refunded","total":"20.00","placed":"2026-03-04T10:30:00Z","refund":20},
 {"status":"pending","total":5},
 "not an object"
]}`

func TestRecordsFromAToolMessage(t *testing.T) {
	t.Parallel()
	x := orderExtractor(t)
	ix, err := x.ExtractRequest(nil, []RoleText{
		{Role: "system", N: 1, Text: `{"orders":[{"id":"S-1"}]}`}, // a role the rule does not read
		{Role: "tool", N: 3, Text: ordersJSON},
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := ix.Records("orders")
	if len(recs) != 2 {
		t.Fatalf("records %+v, want A-1001 and 1002", recs)
	}
	if ix.RecordsSkipped() != 2 {
		t.Errorf("skipped %d, want 2 (no key; not an object)", ix.RecordsSkipped())
	}
	r, ok := ix.Record("orders", "A-1001")
	if !ok || r.Source != "tool message 3" || r.Set != "orders" {
		t.Fatalf("A-1001: %+v %v", r, ok)
	}
	want := map[string]any{
		"id": "A-1001", "status": "shipped", "total": 59.9, "placed": time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		"items": int64(2), "gift": false, "tags": []string{"eu", "web"},
	}
	if got := r.Map(); !reflect.DeepEqual(got, want) {
		t.Errorf("A-1001 fields\n got %#v\nwant %#v", got, want)
	}
	r2, ok := ix.Record("orders", "1002")
	if !ok {
		t.Fatal("a numeric key is its text")
	}
	if v, _ := r2.Field("total"); v != 20.0 {
		t.Errorf("a number written as a string: %v", v)
	}
	if _, ok := r2.Field("items"); ok {
		t.Error("an absent field is reported")
	}
	if _, ok := ix.Record("orders", "S-1"); ok {
		t.Error("a system message was read, but the rule reads user and tool")
	}
}

func TestRecordsFindTheJSONInText(t *testing.T) {
	t.Parallel()
	x := orderExtractor(t)
	for name, text := range map[string]string{
		"whole":      ordersJSON,
		"fence":      "Here are your orders:\n```json\n" + ordersJSON + "\n```\nThanks.",
		"first doc":  "Orders follow. " + ordersJSON + " That is all {not json}.",
		"after junk": "a {broken: 1} then [1, 2 then " + ordersJSON,
	} {
		ix, _ := x.ExtractRequest(nil, []RoleText{{Role: "user", N: 2, Text: text}})
		if _, ok := ix.Record("orders", "A-1001"); !ok {
			t.Errorf("%s: A-1001 not found", name)
		}
	}
}

func TestRecordsIgnoreBrokenJSON(t *testing.T) {
	t.Parallel()
	x := orderExtractor(t)
	for _, text := range []string{
		`{"orders":[{"id":"A-1","status":"x"`, // cut off
		"```json\n{\"orders\": [}\n```",
		`{"orders": 5}`,
		`[[[[[[[[[[`,
		strings.Repeat("{", 10000),
		"",
	} {
		ix, err := x.ExtractRequest(nil, []RoleText{{Role: "tool", N: 1, Text: text}})
		if err != nil || ix.RecordCount() != 0 {
			t.Errorf("%.40q: %d records, %v", text, ix.RecordCount(), err)
		}
	}
}

func TestALaterRecordReplacesAnEarlierOne(t *testing.T) {
	t.Parallel()
	x := orderExtractor(t)
	ix, _ := x.ExtractRequest(nil, []RoleText{
		{Role: "user", N: 1, Text: `{"orders":[{"id":"A","status":"pending"},{"id":"B"}]}`},
		{Role: "tool", N: 2, Text: `{"orders":[{"id":"A","status":"shipped"}]}`},
	})
	recs := ix.Records("orders")
	if len(recs) != 2 || recs[0].Key != "A" || recs[1].Key != "B" {
		t.Fatalf("records %+v", recs)
	}
	if v, _ := recs[0].Field("status"); v != "shipped" || recs[0].Source != "tool message 2" {
		t.Errorf("A is %v from %s, want the tool's shipped", v, recs[0].Source)
	}
}

func TestRecordsRoundTripTheEncoding(t *testing.T) {
	t.Parallel()
	x := orderExtractor(t)
	ix, _ := x.ExtractRequest(nil, []RoleText{{Role: "tool", N: 3, Text: ordersJSON}})
	blob, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalIndex(blob)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Records("orders"), ix.Records("orders")) || back.RecordsSkipped() != ix.RecordsSkipped() {
		t.Fatalf("decoded\n %+v\nwant\n %+v", back.Records("orders"), ix.Records("orders"))
	}
	if r, ok := back.Record("orders", "1002"); !ok || r.Source != "tool message 3" {
		t.Errorf("decoded lookup: %+v %v", r, ok)
	}
	// Every cut and every flipped byte is an error, never a panic.
	for i := range len(blob) - 1 {
		if _, err := UnmarshalIndex(blob[:i]); err == nil {
			t.Fatalf("a blob cut at %d decoded", i)
		}
		bad := append([]byte(nil), blob...)
		bad[i] ^= 0x40
		_, _ = UnmarshalIndex(bad)
	}
	// An ops index (ra3) keeps no records and round-trips as before.
	ops := extractReplay(t, "mcv_vs_miner.txt")
	blob, _ = ops.MarshalBinary()
	if back, err := UnmarshalIndex(blob); err != nil || back.Len() != ops.Len() || back.RecordSets() != nil && len(back.RecordSets()) != 0 {
		t.Fatalf("ops index: %v", err)
	}
}

func TestMergeJoinsRecords(t *testing.T) {
	t.Parallel()
	x := orderExtractor(t)
	a, _ := x.ExtractRequest(nil, []RoleText{{Role: "tool", N: 1, Text: `{"orders":[{"id":"A","status":"pending"},{"status":"x"}]}`}})
	b, _ := x.ExtractRequest(nil, []RoleText{{Role: "tool", N: 1, Text: `{"orders":[{"id":"A","status":"shipped"},{"id":"C"}]}`}})
	m := Merge(a, b)
	if got := len(m.Records("orders")); got != 2 {
		t.Fatalf("%d records, want A and C", got)
	}
	if r, _ := m.Record("orders", "A"); r.Map()["status"] != "shipped" {
		t.Errorf("A is %v, want the later segment's shipped", r.Map()["status"])
	}
	if m.RecordsSkipped() != 1 {
		t.Errorf("skipped %d, want 1", m.RecordsSkipped())
	}
}

// recordsStage is a facts stage over the orders rules: a pack with records and
// no ops.
func recordsStage(tb testing.TB, shared cache.Cache) *Interceptor {
	tb.Helper()
	f, err := New(Config{}, interceptors.Deps{
		Route:   "orders",
		Pack:    &knowledge.Pack{Name: "orders", Facts: orderRules()},
		Cache:   shared,
		Metrics: prometheus.NewRegistry(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func ordersBody(tb testing.TB, tool string) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{
		{"role": "system", "content": "You are a support agent."},
		{"role": "user", "content": "Where is my order A-1001?"},
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "orders", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "c1", "content": tool},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestTheStageReadsRecordsAndCachesThem(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		stageRecords(t, newMemoryCache())
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		url := os.Getenv("FACTGATE_TEST_REDIS_URL")
		if url == "" {
			t.Skip("FACTGATE_TEST_REDIS_URL is not set")
		}
		var nonce [6]byte
		_, _ = rand.Read(nonce[:])
		r, err := cache.NewRedis(cache.RedisConfig{URL: url, KeyPrefix: "factgate:test:" + hex.EncodeToString(nonce[:]) + ":"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		stageRecords(t, r)
	})
}

// stageRecords runs requests carrying orders through facts stages over shared:
// built, then from memory, then on another replica from the shared cache.
func stageRecords(t *testing.T, shared cache.Cache) {
	f := recordsStage(t, shared)
	run := func(f *Interceptor, body []byte) (*Index, Info) {
		ex := newExchange(body, "")
		if err := f.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		ix, info, err := FromExchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		return ix, info
	}
	body := ordersBody(t, ordersJSON)
	ix, info := run(f, body)
	if info.Source != SourceBuilt || ix.RecordCount() != 2 {
		t.Fatalf("first request: %s, %d records", info.Source, ix.RecordCount())
	}
	if _, info2 := run(f, body); info2.Source != SourceMemory || info2.Key != info.Key {
		t.Errorf("again: %s key %s, want memory under %s", info2.Source, info2.Key, info.Key)
	}
	f.store.writes.Wait()
	// Another replica finds it in the shared cache.
	other := recordsStage(t, shared)
	ix3, info3 := run(other, body)
	if info3.Source != SourceShared {
		t.Errorf("another replica: %s, want shared", info3.Source)
	}
	if r, ok := ix3.Record("orders", "A-1001"); !ok || r.Source != "tool message 4" {
		t.Errorf("from the shared cache: %+v %v", r, ok)
	}
	// Other records: another key.
	_, info4 := run(f, ordersBody(t, `{"orders":[{"id":"Z"}]}`))
	if info4.Key == info.Key {
		t.Error("different tool results share a fact key")
	}
	// Broken JSON: an index without records, no failure.
	ix5, info5 := run(f, ordersBody(t, `{"orders":[{"id":`))
	if info5.Source != SourceBuilt || ix5.RecordCount() != 0 {
		t.Errorf("broken JSON: %s, %d records", info5.Source, ix5.RecordCount())
	}
}

// TestASessionMergesTheRecordsOfItsSegments: a follow-up in a session is checked
// against the records every segment carried, the latest record of a key winning.
func TestASessionMergesTheRecordsOfItsSegments(t *testing.T) {
	t.Parallel()
	f := recordsStage(t, newMemoryCache())
	run := func(tool string) *Index {
		ex := newExchange(ordersBody(t, tool), "s-1")
		if err := f.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		ix, _, err := FromExchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	run(`{"orders":[{"id":"A","status":"pending"},{"id":"B","status":"paid"}]}`)
	ix := run(`{"orders":[{"id":"A","status":"shipped"},{"id":"C","status":"paid"}]}`)
	if got := len(ix.Records("orders")); got != 3 {
		t.Fatalf("%d records in the session, want A, B and C", got)
	}
	if r, _ := ix.Record("orders", "A"); r.Map()["status"] != "shipped" {
		t.Errorf("A is %v, want the later segment's shipped", r.Map()["status"])
	}
}
