package proxy

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Where an upstream call's provider key comes from, as the start-up log names it.
const (
	keySourceClient = "client" // the client's own Authorization header (auth.mode passthrough)
	keySourceEnv    = "env"    // the upstream's api_key_env
	keySourcePool   = "pool"   // a key of the upstream's api_key_envs pool
	keySourceNone   = "none"   // no Authorization at all
)

// upstreamKeyNote says, for one upstream, whose key its calls carry to the
// provider; logged once per upstream at start-up so that nobody has to find out
// from a provider's 401.
type upstreamKeyNote struct {
	upstream string
	// source is what a call as a route's first upstream carries (keySource*).
	source string
	// envs are the upstream's configured key variables; set those of them set.
	envs, set []string
	// fallbackFor are the routes it serves only as a later upstream: there it
	// always sends its own key (the client's belongs to the first provider).
	fallbackFor []string
	text        string
}

// upstreamKeyNotes describes every upstream's key, by name.
func (s *Server) upstreamKeyNotes() []upstreamKeyNote {
	var notes []upstreamKeyNote
	names := make([]string, 0, len(s.cfg.Upstreams))
	for name := range s.cfg.Upstreams {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		uc := s.cfg.Upstreams[name]
		n := upstreamKeyNote{upstream: name}
		for _, k := range uc.KeyEnvs() {
			n.envs = append(n.envs, k.Env)
			if os.Getenv(k.Env) != "" {
				n.set = append(n.set, k.Env)
			}
		}
		first := false
		for i := range s.cfg.Routes {
			rc := &s.cfg.Routes[i]
			for j, ru := range rc.UpstreamList() {
				if ru.Name != name {
					continue
				}
				if j == 0 {
					first = true
				} else if !slices.Contains(n.fallbackFor, rc.Name) {
					n.fallbackFor = append(n.fallbackFor, rc.Name)
				}
			}
		}
		own, ownSource := n.ownKey(uc.APIKeyEnvs != nil)
		switch {
		case s.cfg.Auth.Mode != "keys" && first:
			n.source = keySourceClient
			n.text = fmt.Sprintf("upstream %s: calls carry the client's own Authorization header to the provider (auth.mode passthrough)", name)
			if ownSource == keySourceNone {
				n.text += "; a request without one goes without"
			} else {
				n.text += fmt.Sprintf("; %s only for a request without one. To send it on every call, use auth.mode keys", own)
			}
		case ownSource == keySourceNone && s.cfg.Auth.Mode == "keys":
			n.source = ownSource
			n.text = fmt.Sprintf("upstream %s: calls carry no Authorization: auth.mode keys keeps the clients' keys, and the upstream names no api_key_env", name)
		default:
			n.source = ownSource
			n.text = fmt.Sprintf("upstream %s: every call carries %s", name, own)
			if s.cfg.Auth.Mode == "keys" {
				n.text += " (auth.mode keys: the clients' keys stay at the proxy)"
			}
		}
		if len(n.fallbackFor) > 0 && n.source == keySourceClient {
			n.text += fmt.Sprintf("; as a fallback of %s, %s", strings.Join(n.fallbackFor, ", "), own)
		}
		notes = append(notes, n)
	}
	return notes
}

// ownKey names the upstream's own key and whether it is set: "FACTGATE_X", "the
// key pool FACTGATE_A, FACTGATE_B (1 of 2 set)", "FACTGATE_X (not set)".
func (n *upstreamKeyNote) ownKey(pool bool) (string, string) {
	switch {
	case len(n.envs) == 0:
		return "no key", keySourceNone
	case pool:
		return fmt.Sprintf("a key of the pool %s (%d of %d set)", strings.Join(n.envs, ", "), len(n.set), len(n.envs)), keySourcePool
	case len(n.set) == 0:
		return n.envs[0] + " (not set)", keySourceEnv
	}
	return n.envs[0], keySourceEnv
}

// logUpstreamKeys logs whose key each upstream's calls carry.
func (s *Server) logUpstreamKeys() {
	for _, n := range s.upstreamKeyNotes() {
		attrs := []any{"upstream", n.upstream, "key_source", n.source, "detail", n.text}
		if len(n.envs) > 0 {
			attrs = append(attrs, "key_env", strings.Join(n.envs, ","), "key_env_set", strings.Join(n.set, ","))
		}
		if n.source == keySourceEnv && len(n.set) == 0 || n.source == keySourcePool && len(n.set) == 0 {
			s.log.Warn("upstream key", attrs...)
			continue
		}
		s.log.Info("upstream key", attrs...)
	}
}
