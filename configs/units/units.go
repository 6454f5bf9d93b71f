// Package units holds the value types of factgate's configuration and API that
// are not plain numbers: sizes that read as "64MiB" (ByteSize), durations that read
// as "30s" (Duration), and durations that marshal as milliseconds in traces
// (Millis). It is a leaf: it imports nothing from factgate, so every layer —
// proxy, interceptors, cache — can use it.
package units

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ByteSize is a number of bytes that reads from configuration as "64MiB", "512KiB",
// "1GB", "1.5GiB" or a plain byte count ("1048576"). Binary units (KiB, MiB, GiB, TiB)
// are powers of 1024, decimal units (KB, MB, GB, TB) powers of 1000; units are
// case-insensitive and may follow the number after a space. The zero value is zero
// bytes; what zero means (usually "use the default") is up to the field that holds it.
type ByteSize int64

// byteUnits maps a lower-case unit suffix to its multiplier.
var byteUnits = map[string]float64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// ParseByteSize reads a size such as "8MiB", "64KiB", "1GB" or "4096".
func ParseByteSize(s string) (ByteSize, error) {
	text := strings.TrimSpace(s)
	i := 0
	for i < len(text) && (text[i] >= '0' && text[i] <= '9' || text[i] == '.') {
		i++
	}
	number, unit := text[:i], strings.ToLower(strings.TrimSpace(text[i:]))
	multiplier, knownUnit := byteUnits[unit]
	if number == "" || !knownUnit {
		return 0, badSize(s)
	}
	if !strings.Contains(number, ".") {
		n, err := strconv.ParseInt(number, 10, 64)
		if err != nil || float64(n) > math.MaxInt64/multiplier {
			return 0, badSize(s)
		}
		return ByteSize(n * int64(multiplier)), nil
	}
	f, err := strconv.ParseFloat(number, 64)
	if err != nil {
		return 0, badSize(s)
	}
	bytes := f * multiplier
	if bytes >= math.MaxInt64 || bytes != math.Trunc(bytes) {
		return 0, badSize(s)
	}
	return ByteSize(bytes), nil
}

func badSize(s string) error {
	return fmt.Errorf("bad size %q: want e.g. 512KiB, 64MiB, 1GB or a byte count", s)
}

// String renders the size in the largest binary unit that divides it exactly
// ("64MiB", "1536KiB", "100B"), which ParseByteSize reads back.
func (b ByteSize) String() string {
	units := []struct {
		name string
		size ByteSize
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// UnmarshalText reads a size with ParseByteSize.
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText renders the size as String does.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalYAML reads a scalar (a string with a unit or a plain integer); the error
// names the YAML line.
func (b *ByteSize) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: bad size: want a scalar such as 64MiB, got a %s", node.Line, yamlKind(node))
	}
	if err := b.UnmarshalText([]byte(node.Value)); err != nil {
		return fmt.Errorf("line %d: %w", node.Line, err)
	}
	return nil
}

// Duration is a time.Duration that reads from configuration as "500ms", "30s",
// "2m" or "1h30m" (Go duration syntax, never negative). A bare number is refused:
// "30" could mean seconds or nanoseconds. The zero value is no time; what zero
// means (usually "use the default") is up to the field that holds it.
type Duration time.Duration

// ParseDuration reads a non-negative duration such as "500ms" or "1h30m".
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 || (d != 0 && isBareNumber(s)) {
		return 0, fmt.Errorf("bad duration %q: want e.g. 500ms, 30s, 2m", s)
	}
	return Duration(d), nil
}

func isBareNumber(s string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String renders the duration in Go syntax ("1h30m0s"), which ParseDuration reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalText reads a duration with ParseDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalText renders the duration as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalYAML reads a scalar duration; the error names the YAML line.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	node = resolveAlias(node)
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: bad duration: want a scalar such as 30s, got a %s", node.Line, yamlKind(node))
	}
	if err := d.UnmarshalText([]byte(node.Value)); err != nil {
		return fmt.Errorf("line %d: %w", node.Line, err)
	}
	return nil
}

func resolveAlias(node *yaml.Node) *yaml.Node {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	return node
}

func yamlKind(node *yaml.Node) string {
	switch node.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	default:
		return "document"
	}
}

// Millis is a duration that marshals to JSON as milliseconds with a fraction
// ("12.345"): the unit of every duration in a trace.
type Millis time.Duration

// MarshalJSON renders milliseconds ("12.345").
func (d Millis) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

// UnmarshalJSON reads milliseconds.
func (d *Millis) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Millis(ms * float64(time.Millisecond))
	return nil
}
