package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/factgate/factgate/cache"
)

// session is what the cache holds for a browser session, under the hash of its
// token (a stolen cache dump does not yield usable cookies).
type session struct {
	Name string `json:"name"`
	// Key is the hash of the key logged in with: a rotated key ends its sessions.
	Key     string    `json:"key"`
	Expires time.Time `json:"expires"`
}

// Session keys in the cache.
const (
	sessionPrefix = "console:session:" // + the token's hash: the session
	// sessionKeysSet lists the names of the keys that have sessions, and
	// sessionsOfPrefix + HashTag(name) the hashes of each key's sessions: what a
	// replica starting with a key removed or rotated ends.
	sessionKeysSet   = "console:session-keys"
	sessionsOfPrefix = "console:sessions:"
)

// maxConfirmed bounds the sessions a replica remembers having confirmed (for
// the grace while Redis fails); beyond it a session Redis cannot confirm is
// refused.
const maxConfirmed = 10000

// sessionStore keeps sessions in the cache, so that every replica sharing the
// cache (Redis) knows them, and a logout ends them everywhere.
//
// Every request authenticated by a session reads it from Redis (one GET), never
// from a replica's memory tier: a session ended on any replica — logout, or a
// replica starting with its key removed or rotated — is refused by every
// replica on its next request. While Redis fails, a replica accepts a session
// it confirmed in Redis (or created) within the last `grace`, and refuses it
// after that until Redis answers again; a logout made meanwhile reaches the
// other replicas when Redis is back and the logging-out replica has replayed
// its delete.
type sessionStore struct {
	c     cache.Cache
	ttl   time.Duration
	grace time.Duration
	log   *slog.Logger
	now   func() time.Time

	mu sync.Mutex
	// confirmed is when Redis last confirmed each session (by its cache key) on
	// this replica.
	confirmed map[string]time.Time
	// ended is closed, and replaced, whenever a session ends on this replica:
	// live feeds check theirs at once.
	ended chan struct{}
}

func newSessionStore(c cache.Cache, ttl, grace time.Duration, log *slog.Logger) *sessionStore {
	return &sessionStore{c: c, ttl: ttl, grace: grace, log: log, now: time.Now,
		confirmed: map[string]time.Time{}, ended: make(chan struct{})}
}

func sessionKey(token []byte) string {
	sum := sha256.Sum256(token)
	return sessionPrefix + hex.EncodeToString(sum[:])
}

// create starts a session for k. The session is written durably: while Redis
// fails it lives on this replica and reaches Redis when it is back.
func (s *sessionStore) create(ctx context.Context, k keyHash) (string, time.Time, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := base64.RawURLEncoding.EncodeToString(b[:])
	exp := s.now().Add(s.ttl)
	v, _ := json.Marshal(session{Name: k.name, Key: hex.EncodeToString(k.sum[:]), Expires: exp})
	key := sessionKey([]byte(token))
	if err := cache.SetDurable(ctx, s.c, key, v, s.ttl); err != nil {
		return "", time.Time{}, err
	}
	s.remember(key)
	// The index a replica with a key removed or rotated sweeps (sweep).
	_ = s.c.SetAdd(ctx, sessionsOfPrefix+cache.HashTag(k.name), key[len(sessionPrefix):], s.ttl)
	_ = s.c.SetAdd(ctx, sessionKeysSet, k.name, s.ttl)
	return token, exp, nil
}

// remember records that the session under key was confirmed now.
func (s *sessionStore) remember(key string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.confirmed[key]; !ok && len(s.confirmed) >= maxConfirmed {
		for k, at := range s.confirmed {
			if now.Sub(at) > s.grace {
				delete(s.confirmed, k)
			}
		}
		if len(s.confirmed) >= maxConfirmed {
			return
		}
	}
	s.confirmed[key] = now
}

func (s *sessionStore) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.confirmed, key)
}

// lookup returns the key a live session was made with: it exists (confirmed
// by Redis, or within the grace while Redis fails), has not expired, and its
// key is still configured with the same secret.
func (s *sessionStore) lookup(ctx context.Context, token []byte, keys keyRing) (keyHash, time.Time, bool) {
	key := sessionKey(token)
	b, ok, confirmed, err := cache.GetConfirmed(ctx, s.c, key)
	switch {
	case err != nil || !ok:
		if confirmed {
			s.forget(key)
		}
		return keyHash{}, time.Time{}, false
	case confirmed:
		s.remember(key)
	default:
		s.mu.Lock()
		at, seen := s.confirmed[key]
		s.mu.Unlock()
		if !seen || s.now().Sub(at) > s.grace {
			return keyHash{}, time.Time{}, false
		}
	}
	var sess session
	if json.Unmarshal(b, &sess) != nil || s.now().After(sess.Expires) {
		return keyHash{}, time.Time{}, false
	}
	k, ok := keys.byName(sess.Name)
	if !ok || subtle.ConstantTimeCompare([]byte(hex.EncodeToString(k.sum[:])), []byte(sess.Key)) != 1 {
		return keyHash{}, time.Time{}, false
	}
	return k, sess.Expires, true
}

// delete ends the session of token on every replica (see sessionStore).
func (s *sessionStore) delete(ctx context.Context, token []byte) error {
	key := sessionKey(token)
	err := s.c.Delete(ctx, key)
	s.forget(key)
	s.mu.Lock()
	close(s.ended)
	s.ended = make(chan struct{})
	s.mu.Unlock()
	return err
}

// endedSignal is closed when a session next ends on this replica.
func (s *sessionStore) endedSignal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// sweep ends, in Redis, the sessions of keys that keys no longer has (removed
// from auth.keys) or has with another secret (rotated), so that every replica
// refuses them — those still running the old config too. It runs when the
// console starts, and again whenever Redis answers after it failed (it may have
// missed the sweep). It reports false when Redis could not be read.
func (s *sessionStore) sweep(ctx context.Context, keys keyRing) bool {
	names, confirmed, err := cache.SetMembersConfirmed(ctx, s.c, sessionKeysSet)
	if err != nil || !confirmed {
		return false
	}
	var ended []string
	count := 0
	for _, name := range names {
		k, configured := keys.byName(name)
		want := hex.EncodeToString(k.sum[:])
		hashes, confirmed, err := cache.SetMembersConfirmed(ctx, s.c, sessionsOfPrefix+cache.HashTag(name))
		if err != nil || !confirmed {
			return false
		}
		n := 0
		for _, h := range hashes {
			key := sessionPrefix + h
			if configured {
				b, ok, confirmed, err := cache.GetConfirmed(ctx, s.c, key)
				if err != nil || !confirmed {
					return false
				}
				var sess session
				if !ok || json.Unmarshal(b, &sess) != nil || subtle.ConstantTimeCompare([]byte(sess.Key), []byte(want)) == 1 {
					continue
				}
			}
			if s.c.Delete(ctx, key) == nil {
				n++
			}
		}
		if n > 0 {
			count += n
			ended = append(ended, name)
		}
	}
	if count > 0 {
		slices.Sort(ended)
		s.log.Info("console: ended the console sessions of keys removed or rotated in auth.keys, on every replica",
			"keys", ended, "sessions", count)
	}
	return true
}
