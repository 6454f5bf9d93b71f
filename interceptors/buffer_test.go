package interceptors

import "testing"

// TestAdoptedBufferServesTheClassItFills: a buffer given to the exchange (Adopt,
// as the proxy does with fasthttp's body buffer) goes to the pool on Release in
// the largest class it has room for, whatever its capacity, and SpareBuffer hands
// it out again; one too small for any class is left to the garbage collector.
func TestAdoptedBufferServesTheClassItFills(t *testing.T) {
	const capacity = 3 << 18 // 768 KiB: fills the 512 KiB class, which no other test uses
	adopted := make([]byte, 10, capacity)
	ex := &Exchange{}
	ex.Adopt(adopted)
	ex.Adopt(make([]byte, 0, 100))
	if len(ex.buffers) != 1 {
		t.Fatalf("%d buffers adopted, want 1 (a 100-byte buffer fits no class)", len(ex.buffers))
	}
	ex.Release()
	spare := SpareBuffer(300_000)
	if len(spare) != 0 || cap(spare) != capacity || &spare[:1][0] != &adopted[0] {
		t.Fatalf("SpareBuffer(300000) after the release: len %d cap %d, not the adopted buffer", len(spare), cap(spare))
	}
	if b := SpareBuffer(300_000); b != nil {
		t.Fatalf("a second SpareBuffer got a buffer of cap %d from a class that held one", cap(b))
	}
	if b := SpareBuffer(maxPooledBuffer + 1); b != nil {
		t.Fatalf("SpareBuffer beyond the largest class returned cap %d", cap(b))
	}
}
