package claims

import (
	"sync"

	"github.com/factgate/factgate/interceptors"
)

// Locations remembers where the claims block is in the answers of one request,
// so that a stage after the one that parsed an answer does not locate its block
// again: the revision step strips the block of the draft validation parsed.
// Locate depends on nothing but the text and the marker, so an entry serves every
// parser with the same marker. A nil *Locations remembers nothing. It is safe for
// concurrent use (choices may be validated at the same time).
type Locations struct {
	mu      sync.Mutex
	entries [maxLocations]located
	next    int // the slot the next entry takes (the oldest one)
}

// maxLocations bounds the answers a request remembers: each choice's draft is
// what the later stages ask about; revisions are rare and newer entries replace
// the oldest.
const maxLocations = 4

// located is one remembered answer.
type located struct {
	marker, content string
	loc             Location
	ok              bool
}

// locationsKey is the Exchange value key of a request's Locations.
type locationsKey struct{}

// AttachLocations stores a new Locations on ex and returns it. Call it from a
// request phase: Exchange values must not be set while the answer phases run.
func AttachLocations(ex *interceptors.Exchange) *Locations {
	l := &Locations{}
	l.Attach(ex)
	return l
}

// Attach stores l, which must be empty, on ex, as AttachLocations stores a new
// one: for a stage that keeps the Locations in a request value of its own, to
// allocate them with it.
func (l *Locations) Attach(ex *interceptors.Exchange) {
	ex.SetValue(locationsKey{}, l)
}

// LocationsOf returns the Locations stored on ex, nil when none (the parsers then
// locate every answer themselves).
func LocationsOf(ex *interceptors.Exchange) *Locations {
	if ex == nil {
		return nil
	}
	l, _ := ex.Value(locationsKey{}).(*Locations)
	return l
}

// remember records where the block of content is under marker.
func (l *Locations) remember(marker, content string, loc Location) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.entries {
		if e := &l.entries[i]; e.ok && e.marker == marker && e.content == content {
			return
		}
	}
	l.entries[l.next] = located{marker: marker, content: content, loc: loc, ok: true}
	l.next = (l.next + 1) % len(l.entries)
}

// recall returns the remembered location of content under marker.
func (l *Locations) recall(marker, content string) (Location, bool) {
	if l == nil {
		return Location{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.entries {
		// Equal contents: the same bytes locate the same block. Contents decoded
		// twice from the same response differ in memory only, so the comparison
		// reads them once, far cheaper than locating.
		if e := &l.entries[i]; e.ok && e.marker == marker && e.content == content {
			return e.loc, true
		}
	}
	return Location{}, false
}

// LocateIn is Locate that reuses the location l remembers for content, and
// remembers the one it finds.
func (p *Parser) LocateIn(l *Locations, content string) Location {
	if loc, ok := l.recall(p.marker, content); ok {
		return loc
	}
	loc := p.Locate(content)
	l.remember(p.marker, content, loc)
	return loc
}

// ParseIn is Parse that reuses the location l remembers for content, and
// remembers the one it finds.
func (p *Parser) ParseIn(l *Locations, content string, req Requirement) *Claims {
	return p.parseAt(content, p.LocateIn(l, content), req)
}

// StripBlockIn is StripBlock that reuses the location l remembers for content.
func (p *Parser) StripBlockIn(l *Locations, content string) string {
	return p.stripAt(content, p.LocateIn(l, content))
}
