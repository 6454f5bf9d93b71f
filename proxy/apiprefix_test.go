package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestAPIPrefixLongestWins: of two overlapping API prefixes the longer one
// serves the paths below it, every time and whichever was registered first;
// the shorter one serves the rest.
func TestAPIPrefixLongestWins(t *testing.T) {
	t.Parallel()
	named := func(name string) fasthttp.RequestHandler {
		return func(rc *fasthttp.RequestCtx) { rc.SetBodyString(name) }
	}
	short := WithAPI("/factgate/v1/reports/", named("reports"))
	long := WithAPI("/factgate/v1/reports/daily/", named("daily"))
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{name: "short first", opts: []Option{short, long}},
		{name: "long first", opts: []Option{long, short}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", "", tc.opts...)
			get := func(path string) (int, string) {
				req, err := http.NewRequest("GET", h.base+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", harnessCredential)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for _, want := range []struct{ path, served string }{
				{"/factgate/v1/reports/daily/2026-12-07", "daily"},
				{"/factgate/v1/reports/weekly", "reports"},
				{"/factgate/v1/reports/daily", "reports"}, // the longer prefix itself is not below it
			} {
				// A map's order changes from one range to the next: ask often.
				for range 20 {
					if status, body := get(want.path); status != 200 || body != want.served {
						t.Fatalf("GET %s: %d %q, want 200 %q", want.path, status, body, want.served)
					}
				}
			}
			if status, _ := get("/factgate/v1/reports/"); status != 404 {
				t.Errorf("GET /factgate/v1/reports/ (a prefix itself): %d, want 404", status)
			}
		})
	}
}
