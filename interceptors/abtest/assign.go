package abtest

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
)

// The request headers the experiment reads. Like every X-Factgate-* header, they
// are never forwarded upstream.
const (
	// HeaderVariant forces a variant when the experiment allows forcing; on the
	// response it names the variant the request got.
	HeaderVariant = "X-Factgate-Variant"
	// HeaderSubject names the subject a request is assigned by (a user, a team, a
	// document): the same subject always gets the same variant.
	HeaderSubject = "X-Factgate-Subject"
)

// Method says how a request got its variant.
type Method string

// The assignment methods (the trace, factgate_experiment_assignments_total).
const (
	// MethodForced: the X-Factgate-Variant header chose it (allow_forcing).
	MethodForced Method = "forced"
	// MethodSubject: the subject's hash chose it (sticky).
	MethodSubject Method = "subject"
	// MethodRandom: no subject; drawn at random by weight.
	MethodRandom Method = "random"
	// MethodFallback: assignment or applying the variant failed; the control was
	// assigned (fail-open).
	MethodFallback Method = "fallback"
)

// SubjectSource says where a request's subject came from.
type SubjectSource string

// The subject sources, in the order they are tried.
const (
	SubjectHeader    SubjectSource = "header " + HeaderSubject
	SubjectUser      SubjectSource = "the body's user"
	SubjectSession   SubjectSource = "header " + reqcontext.HeaderSession
	SubjectMetadata  SubjectSource = "metadata " + reqcontext.MetadataSession
	SubjectClientKey SubjectSource = "the client key"
)

// subjectOf returns the request's subject and where it came from: the
// X-Factgate-Subject header, else the body's user, else the session
// (X-Factgate-Session, else metadata factgate.session — read here, since the
// context stage runs after this one), else the client key. ok is false when the
// request names none.
func subjectOf(ex *interceptors.Exchange) (subject string, src SubjectSource, ok bool) {
	if v := headerText(ex.Header, HeaderSubject); v != "" {
		return v, SubjectHeader, true
	}
	if u := gjson.GetBytes(ex.Body, "user"); u.Type == gjson.String && strings.TrimSpace(u.Str) != "" {
		return u.Str, SubjectUser, true
	}
	if v := headerText(ex.Header, reqcontext.HeaderSession); v != "" {
		return v, SubjectSession, true
	}
	if v := metadataSession(ex.Body); v != "" {
		return v, SubjectMetadata, true
	}
	if ex.ClientKey != "" {
		return ex.ClientKey, SubjectClientKey, true
	}
	return "", "", false
}

// headerText reads a header as the context stage does: percent-decoded (so that a
// session sent in the header and in metadata is one subject), trimmed. A value
// that does not decode is used as sent.
func headerText(h interceptors.HeaderReader, name string) string {
	if h == nil {
		return ""
	}
	raw := h.Peek(name)
	if len(raw) == 0 {
		return ""
	}
	v := string(raw)
	if strings.IndexByte(v, '%') >= 0 {
		if d, err := url.PathUnescape(v); err == nil {
			v = d
		}
	}
	return strings.TrimSpace(v)
}

// metadataSession returns the body's metadata factgate.session (key in any case;
// the last one when repeated, as a JSON decoder reads it), or "".
func metadataSession(body []byte) string {
	md := gjson.GetBytes(body, "metadata")
	if !md.IsObject() {
		return ""
	}
	session := ""
	md.ForEach(func(k, v gjson.Result) bool {
		if strings.EqualFold(k.Str, reqcontext.MetadataSession) && v.Type == gjson.String {
			session = strings.TrimSpace(v.Str)
		}
		return true
	})
	return session
}

// pickBySubject chooses the subject's variant by weighted rendezvous hashing
// (highest random weight): every variant draws a score from the hash of (salt,
// subject, variant name) and the highest score wins. With u uniform in (0, 1) and
// score = weight / −ln(u), variant i wins with probability weight_i / Σ weights
// exactly (−ln u is exponential, and the least of independent exponentials with
// rates w_i is the i-th with probability w_i/Σw).
//
// Why not a point on the cumulative weights: there, a changed weight shifts every
// later boundary, and adding a variant rescales them all, so subjects move between
// variants whose weights did not change. Here a variant's score depends only on its
// own weight and name: raising one weight moves subjects only into that variant,
// lowering it only out of it, adding a variant only into the new one, removing one
// only out of it — the fewest subjects any scheme that hits the weights can move.
// Reordering the variants in the config moves nobody.
func (e *Experiment) pickBySubject(subject string) *variant {
	best, bestScore := e.variants[0], -1.0
	for _, v := range e.variants {
		if s := v.weight / -math.Log(unitHash(e.salt, subject, v.name)); s > bestScore {
			best, bestScore = v, s
		}
	}
	return best
}

// unitHash maps (salt, subject, variant) to a number uniform in the open interval
// (0, 1), the same on every replica and across restarts: the first 53 bits of
// SHA-256 over the three strings, each ended by a NUL so that no two triples
// collide by concatenation.
func unitHash(salt, subject, variant string) float64 {
	var buf [256]byte
	b := append(buf[:0], salt...)
	b = append(b, 0)
	b = append(b, subject...)
	b = append(b, 0)
	b = append(b, variant...)
	b = append(b, 0)
	sum := sha256.Sum256(b)
	x := binary.BigEndian.Uint64(sum[:8])
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// pickAtRandom draws a variant by weight for a request without a subject.
func (e *Experiment) pickAtRandom() *variant {
	r := e.random() * e.totalWeight
	for _, v := range e.variants {
		if r < v.weight {
			return v
		}
		r -= v.weight
	}
	return e.variants[len(e.variants)-1] // r == totalWeight after rounding
}
