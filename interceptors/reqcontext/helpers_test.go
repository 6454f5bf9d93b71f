package reqcontext

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

var testLib = sync.OnceValues(func() (*knowledge.Library, error) {
	reg, err := knowledge.Builtin()
	if err != nil {
		return nil, err
	}
	return knowledge.NewLibrary(reg, knowledge.LibraryOptions{})
})

// testDeps returns deps for a route with the built-in pack name.
func testDeps(t testing.TB, pack string) interceptors.Deps {
	t.Helper()
	lib, err := testLib()
	if err != nil {
		t.Fatal(err)
	}
	p := lib.Registry().Pack(pack)
	if p == nil {
		t.Fatalf("no built-in pack %q", pack)
	}
	return interceptors.Deps{Route: "test", Pack: p, Library: lib}
}

func newResolver(t testing.TB, cfg *Config) *Interceptor {
	t.Helper()
	r, err := New(cfg, testDeps(t, "ra3"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// headers builds a real fasthttp request header (case-insensitive Peek) from
// name, value pairs.
func headers(kv ...string) *fasthttp.RequestHeader {
	h := &fasthttp.RequestHeader{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// chatBody builds a chat completion body with a system message, the user text and
// extra top-level members (raw JSON) after messages.
func chatBody(t testing.TB, user string, extra string) []byte {
	t.Helper()
	u, err := json.Marshal(user)
	if err != nil {
		t.Fatal(err)
	}
	b := `{"model":"ra3-analyst","messages":[{"role":"system","content":"你是录像分析助手。"},{"role":"user","content":` + string(u) + `}]`
	if extra != "" {
		b += "," + extra
	}
	return []byte(b + "}")
}

func exchange(body []byte, h interceptors.HeaderReader) *interceptors.Exchange {
	return &interceptors.Exchange{Route: "test", Body: body, Original: append([]byte(nil), body...), Header: h, Trace: interceptors.NewTrace("test")}
}

func replay(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "replays", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
