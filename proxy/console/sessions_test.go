package console_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/tidwall/gjson"
)

// keyAppRotated is app's key after a rotation.
const keyAppRotated = "sk-test-console-app-rotated-0001"

func init() {
	os.Setenv("FACTGATE_TEST_CONSOLE_APP_ROTATED", keyAppRotated)
}

// sharedRedis returns the cache block of replicas sharing the test Redis under
// a key prefix of their own (removed when the test ends); it skips without one.
func sharedRedis(t *testing.T) string {
	t.Helper()
	url := os.Getenv("FACTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skip("FACTGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0); skipping a test of replicas sharing Redis")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	prefix := "factgate:test:console:" + hex.EncodeToString(nonce[:]) + ":"
	t.Cleanup(func() {
		client := redis.NewClient(opts)
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
	})
	return fmt.Sprintf("cache:\n  redis: {url: %q, key_prefix: %q}\n", url, prefix)
}

// replicas starts n console fixtures on one Redis, as a Deployment runs them.
func replicas(t *testing.T, n int, cacheBlock string) []*fixture {
	t.Helper()
	var out []*fixture
	for range n {
		out = append(out, newFixture(t, fixtureConfig+cacheBlock))
	}
	return out
}

// login logs in with key and returns the session cookie's value.
func (f *fixture) login(key string) string {
	f.t.Helper()
	status, h, b := f.do("POST", "/factgate/v1/session", "", fmt.Sprintf(`{"key": %q}`, key), "X-Factgate-Console", "1")
	if status != 200 {
		f.t.Fatalf("login: %d %s", status, b)
	}
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "factgate_session" {
			return c.Value
		}
	}
	f.t.Fatal("login set no session cookie")
	return ""
}

// withCookie sends a request carrying the session cookie (as a browser, or
// whoever copied it, would) and returns the status and body.
func (f *fixture) withCookie(method, path, cookie, body string) (int, []byte) {
	f.t.Helper()
	status, _, b := f.do(method, path, "", body, "Cookie", "factgate_session="+cookie, "X-Factgate-Console", "1")
	return status, b
}

// TestLogoutEndsTheSessionOnEveryReplica: after logout on one replica, the very
// next request with the same cookie is refused by every replica — in both
// directions — though each had just read the session (and keeps what it reads
// from Redis in memory for cache.tiered.local_ttl).
func TestLogoutEndsTheSessionOnEveryReplica(t *testing.T) {
	t.Parallel()
	fleet := replicas(t, 2, sharedRedis(t))
	for _, dir := range []struct {
		name         string
		login, other *fixture
	}{{"logout on A, read on B", fleet[0], fleet[1]}, {"logout on B, read on A", fleet[1], fleet[0]}} {
		t.Run(dir.name, func(t *testing.T) {
			cookie := dir.login.login(keyApp)
			for range 3 {
				for _, f := range fleet {
					if status, b := f.withCookie("GET", "/factgate/v1/requests", cookie, ""); status != 200 {
						t.Fatalf("with the session: %d %s", status, b)
					}
				}
			}
			if status, _ := dir.login.withCookie("DELETE", "/factgate/v1/session", cookie, ""); status != 204 {
				t.Fatalf("logout: %d", status)
			}
			for _, f := range []*fixture{dir.other, dir.login} {
				status, b := f.withCookie("GET", "/factgate/v1/requests", cookie, "")
				if status != 401 || gjson.GetBytes(b, "error.code").Str != "session_expired" {
					t.Fatalf("the ended session's next request: %d %s, want 401 session_expired", status, b)
				}
			}
		})
	}
}

// TestARotatedOrRemovedKeyEndsItsSessionsEverywhere: a replica that starts with
// app's key rotated and other's removed from auth.keys ends their sessions on
// every replica — those still running the old config refuse them on their next
// request too — while an unchanged key's session goes on.
func TestARotatedOrRemovedKeyEndsItsSessionsEverywhere(t *testing.T) {
	t.Parallel()
	block := sharedRedis(t)
	old := replicas(t, 1, block)[0]
	app, other, ops := old.login(keyApp), old.login(keyOther), old.login(keyOps)
	for _, c := range []string{app, other, ops} {
		if status, b := old.withCookie("GET", "/factgate/v1/requests", c, ""); status != 200 {
			t.Fatalf("before the rotation: %d %s", status, b)
		}
	}
	rotated := strings.NewReplacer(
		"    - {name: app, key_env: FACTGATE_TEST_CONSOLE_APP}\n", "    - {name: app, key_env: FACTGATE_TEST_CONSOLE_APP_ROTATED}\n",
		"    - {name: other, key_env: FACTGATE_TEST_CONSOLE_OTHER}\n", "",
	).Replace(fixtureConfig)
	if rotated == fixtureConfig {
		t.Fatal("the rotated config is the old one")
	}
	newer := newFixture(t, rotated+block)
	for name, c := range map[string]string{"app (rotated)": app, "other (removed)": other} {
		for _, f := range []*fixture{old, newer} {
			if status, b := f.withCookie("GET", "/factgate/v1/requests", c, ""); status != 401 {
				t.Errorf("%s's old session after the new config started: %d %s, want 401", name, status, b)
			}
		}
	}
	if status, b := old.withCookie("GET", "/factgate/v1/requests", ops, ""); status != 200 {
		t.Errorf("ops's session (its key unchanged): %d %s", status, b)
	}
	if !strings.Contains(newer.logs.String(), "ended the console sessions of keys removed or rotated") {
		t.Errorf("the replica that ended the sessions did not say so:\n%s", newer.logs.String())
	}
}

// feed opens the live feed with a session cookie and returns the trace ids of
// the events as they come; the channel closes when the stream ends.
func (f *fixture) feed(cookie string) <-chan string {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.base+"/factgate/v1/requests/stream", nil)
	req.Header.Set("Cookie", "factgate_session="+cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		f.t.Fatalf("live feed: %d", resp.StatusCode)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				events <- gjson.Get(line[6:], "trace_id").Str
			}
		}
	}()
	return events
}

// TestALiveFeedEndsWithItsSession: an open live feed stops delivering and ends
// within its stated bound (1 s) once its session is ended — on the feed's own
// replica at once, on another replica by its next check.
func TestALiveFeedEndsWithItsSession(t *testing.T) {
	t.Parallel()
	fleet := replicas(t, 2, sharedRedis(t))
	for _, tc := range []struct {
		name         string
		feed, logout *fixture
		within       time.Duration
	}{
		{"logout on the feed's replica", fleet[0], fleet[0], 500 * time.Millisecond},
		{"logout on another replica", fleet[0], fleet[1], 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cookie := tc.feed.login(keyApp)
			events := tc.feed.feed(cookie)
			first := tc.feed.story(keyApp, "请简要分析这局录像。")
			for seen := ""; seen != first; {
				select {
				case seen = <-events: // the kept requests come first
				case <-time.After(10 * time.Second):
					t.Fatal("the feed did not deliver the request made while the session lived")
				}
			}
			if status, _ := tc.logout.withCookie("DELETE", "/factgate/v1/session", cookie, ""); status != 204 {
				t.Fatalf("logout: %d", status)
			}
			ended := time.Now()
			time.Sleep(tc.within)
			var after []string
			for range 3 {
				after = append(after, tc.feed.story(keyApp, "请简要分析这局录像。"))
			}
			deadline := time.After(5 * time.Second)
			for {
				select {
				case id, open := <-events:
					if !open {
						t.Logf("the feed ended %v after the logout", time.Since(ended).Round(time.Millisecond))
						return
					}
					t.Fatalf("the feed delivered %s (of %v) after its session ended", id, after)
				case <-deadline:
					t.Fatal("the feed is still open 5s after its session ended")
				}
			}
		})
	}
}

// TestSessionsWhileRedisFails: the stated bound while Redis fails. A replica
// keeps accepting a session it confirmed in Redis for offline_session_grace,
// then refuses it until Redis answers; a logout made meanwhile ends the session
// at once on its replica, and everywhere once Redis is back.
func TestSessionsWhileRedisFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, 0)
	block := fmt.Sprintf(`cache:
  redis: {url: "redis://%s/0", key_prefix: "factgate:test:offline:", dial_timeout: 300ms, read_timeout: 300ms, write_timeout: 300ms}
  tiered: {probe_interval: 100ms, error_backoff: 100ms}
console: {offline_session_grace: 1s}
`, srv.Addr())
	fleet := replicas(t, 2, block)
	a, b := fleet[0], fleet[1]
	cookie := a.login(keyApp)
	for _, f := range fleet {
		if status, body := f.withCookie("GET", "/factgate/v1/requests", cookie, ""); status != 200 {
			t.Fatalf("with Redis up: %d %s", status, body)
		}
	}

	srv.Freeze() // a hung Redis
	t.Cleanup(srv.Thaw)
	if status, body := b.withCookie("GET", "/factgate/v1/requests", cookie, ""); status != 200 {
		t.Fatalf("B within the grace: %d %s", status, body)
	}
	if status, _ := a.withCookie("DELETE", "/factgate/v1/session", cookie, ""); status != 204 {
		t.Fatalf("logout on A while Redis hangs: %d", status)
	}
	if status, _ := a.withCookie("GET", "/factgate/v1/requests", cookie, ""); status != 401 {
		t.Fatalf("A after its own logout: %d, want 401 at once", status)
	}
	time.Sleep(1200 * time.Millisecond)
	if status, _ := b.withCookie("GET", "/factgate/v1/requests", cookie, ""); status != 401 {
		t.Fatalf("B past the grace without Redis: %d, want 401", status)
	}

	srv.Thaw()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	waitFor(t, "A to replay its logout in Redis", func() bool {
		keys, err := client.Keys(context.Background(), "factgate:test:offline:console:session:*").Result()
		return err == nil && len(keys) == 0
	})
	for _, f := range fleet {
		if status, _ := f.withCookie("GET", "/factgate/v1/requests", cookie, ""); status != 401 {
			t.Fatalf("the logged-out session once Redis is back: %d, want 401", status)
		}
	}
}
