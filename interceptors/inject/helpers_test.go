package inject

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

var testLib = sync.OnceValues(func() (*knowledge.Library, error) {
	reg, err := knowledge.Builtin()
	if err != nil {
		return nil, err
	}
	return knowledge.NewLibrary(reg, knowledge.LibraryOptions{})
})

func testDeps(t testing.TB, pack string) interceptors.Deps {
	t.Helper()
	lib, err := testLib()
	if err != nil {
		t.Fatal(err)
	}
	d := interceptors.Deps{Route: "test", Library: lib}
	if pack != "" {
		if d.Pack = lib.Registry().Pack(pack); d.Pack == nil {
			t.Fatalf("no built-in pack %q", pack)
		}
	}
	return d
}

func newInjector(t testing.TB, cfg *Config, pack string) *Injector {
	t.Helper()
	in, err := New(cfg, testDeps(t, pack))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return in
}

// resolved runs the real context stage of the pack on body and returns the
// exchange, ready for the inject stage.
func resolved(t testing.TB, pack string, body []byte) *interceptors.Exchange {
	t.Helper()
	r, err := reqcontext.New(nil, testDeps(t, pack))
	if err != nil {
		t.Fatal(err)
	}
	ex := &interceptors.Exchange{Route: "test", Body: body, Original: append([]byte(nil), body...), Trace: interceptors.NewTrace("test")}
	if err := r.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	return ex
}

func run(t testing.TB, in *Injector, ex *interceptors.Exchange) {
	t.Helper()
	if err := in.OnRequest(context.Background(), ex); err != nil {
		t.Fatalf("OnRequest: %v", err)
	}
	if !gjson.ValidBytes(ex.Body) {
		t.Fatalf("the edited body is not valid JSON: %s", ex.Body)
	}
}

// rendered is the knowledge the proxy renders for the set and scopes.
func rendered(t testing.TB, setName string, scopes knowledge.Scopes) string {
	t.Helper()
	lib, _ := testLib()
	text, ok := lib.Render(setName, scopes)
	if !ok {
		t.Fatalf("no set %q", setName)
	}
	return text
}

func contractOf(t testing.TB, pack string) string {
	t.Helper()
	return PackContract(testDeps(t, pack).Pack)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func replay(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// systemMessages returns the contents of the body's system messages and the index
// of the first one.
func systemMessages(body []byte) (contents []string, first int) {
	first = -1
	for i, m := range gjson.GetBytes(body, "messages").Array() {
		if r := m.Get("role").Str; r == "system" || r == "developer" {
			if first < 0 {
				first = i
			}
			contents = append(contents, m.Get("content").Str)
		}
	}
	return contents, first
}
