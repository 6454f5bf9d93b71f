package proxy

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy/console"
)

// consoleAdminName is the name of the console's admin in auth mode passthrough
// (console.admin_key_env), in the audit log.
const consoleAdminName = "console-admin"

// newConsole builds the console when the config turns it on and registers its
// API. It runs once the routes' chains are final.
func (s *Server) newConsole() error {
	cc := s.cfg.Console
	if !cc.On() {
		return nil
	}
	var keys []console.Key
	keysMode := s.cfg.Auth.Mode == "keys"
	if keysMode {
		for i, k := range s.keys {
			keys = append(keys, console.Key{Name: k.name, Secret: k.key, Admin: s.cfg.Auth.Keys[i].Admin})
		}
	} else if cc.AdminKeyEnv != "" {
		v := os.Getenv(cc.AdminKeyEnv)
		switch {
		case v == "" && s.allowMissingSecrets:
			s.warnings = append(s.warnings, fmt.Sprintf("console.admin_key_env: %s is not set", cc.AdminKeyEnv))
		case v == "":
			return fmt.Errorf("console.admin_key_env: environment variable %s is not set", cc.AdminKeyEnv)
		}
		keys = append(keys, console.Key{Name: consoleAdminName, Secret: []byte(v), Admin: true})
	}
	if !keysMode {
		s.log.Warn("console: auth.mode passthrough with console.enabled: every request and trace (the answers' text included) is readable by anyone who reaches the listener, without a key; the trace API still gives a trace only to the credential that made its request. Bind to loopback or put the listener behind your own auth",
			"path", console.UIPath)
	}
	var routes []console.Route
	for _, rc := range s.cfg.Routes {
		rt := s.routeByName[rc.Name]
		r := console.Route{Name: rc.Name}
		if rc.Pack != "" {
			r.Pack = s.library.Registry().Pack(rc.Pack)
		}
		for _, ic := range rt.chain {
			if p, ok := ic.(interceptors.PromptPreviewer); ok {
				r.Preview = func(set *knowledge.Set, scopes knowledge.Scopes) string {
					return p.Preview(set, scopes, interceptors.Overrides{})
				}
			}
		}
		routes = append(routes, r)
	}
	var traces console.TraceLoader
	if s.traces != nil {
		traces = s.traces.LoadTrace
	}
	s.console = console.New(console.Options{
		Config:   cc,
		KeysMode: keysMode,
		Keys:     keys,
		Cache:    s.cache,
		Traces:   traces,
		Library:  s.library,
		Routes:   routes,
		Log:      s.log,
		Draining: s.draining.Load,
	})
	for path, h := range s.console.Handlers() {
		s.HandleAPI(path, h)
	}
	return nil
}

// authenticateAPI authenticates a factgate API request: with the console on, a
// Bearer key or the console's session cookie (the viewer is stored for the
// handlers); without it, the proxy's own auth.
func (s *Server) authenticateAPI(rc *fasthttp.RequestCtx) (string, *interceptors.Error) {
	if s.console == nil {
		return s.authenticate(rc)
	}
	v, err := s.console.Authenticate(rc)
	if err != nil {
		return "", err
	}
	console.SetViewer(rc, v)
	return v.Name, nil
}

// keepRequest puts the client's request into the trace for the console's trace
// page, each message cut at console.request_bytes (not with traces.content off).
func (s *Server) keepRequest(ex *interceptors.Exchange) {
	if s.console == nil || (s.cfg.Traces.Content != nil && !*s.cfg.Traces.Content) {
		return
	}
	if n := s.console.RequestBytes(); n > 0 {
		ex.Trace.Request = console.CaptureRequest(ex, n)
	}
}

// recordRequest adds a finished intercepted request to the console's list.
func (s *Server) recordRequest(ex *interceptors.Exchange, status int, errCode string, total time.Duration) {
	if s.console != nil {
		s.console.Record(console.Summarize(ex, status, errCode, total))
	}
}

// consoleOff answers the console's paths when the console is off: why, and the
// key that turns it on — a small page for a browser opening /factgate/ui/, the
// OpenAI error envelope (404 console_disabled) for everything else.
func (s *Server) consoleOff(rc *fasthttp.RequestCtx) {
	why := s.consoleOffReason()
	if bytes.HasPrefix(rc.Path(), []byte(console.UIPath)) || string(rc.Path()) == strings.TrimSuffix(console.UIPath, "/") {
		if bytes.Contains(rc.Request.Header.Peek("Accept"), []byte("text/html")) {
			rc.Response.Reset()
			rc.SetStatusCode(fasthttp.StatusNotFound)
			rc.SetContentType("text/html; charset=utf-8")
			rc.Response.Header.Set("Cache-Control", "no-store")
			fmt.Fprintf(rc, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>factgate console: off</title></head>\n"+
				"<body style=\"font-family: sans-serif; max-width: 42em; margin: 3em auto\"><h1>The factgate console is off</h1>\n<p>%s</p>\n"+
				"<p>See the README's Console section.</p></body></html>\n", html.EscapeString(why))
			return
		}
	}
	writeError(rc, interceptors.Errorf(404, "invalid_request_error", "console_disabled", "%s", why))
}

// consoleOffReason says why the console is off and how to turn it on.
func (s *Server) consoleOffReason() string {
	file := s.cfg.File
	if file == "" {
		file = "the config"
	}
	if s.cfg.Auth.Mode == "keys" {
		return fmt.Sprintf("The console is off: console.enabled is false in %s. Remove that line (with auth.mode: keys it is on by default) or set it to true, and restart.", file)
	}
	return fmt.Sprintf("The console is off: auth.mode is passthrough in %s, so the proxy has no keys to log in with. "+
		"To turn it on, use auth.mode: keys with a key per client (configs/keys.yaml ships one), or set console.enabled: true — "+
		"then anyone who reaches this listener reads every request and trace, without a key — and restart.", file)
}
