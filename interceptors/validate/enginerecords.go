package validate

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
)

// Records (facts read from JSON, interceptors/facts) in the issues of the rules
// of declared claim kinds, and the rendering of values cel-go gives (maps,
// doubles, timestamps).

// recordFacts returns the records an issue's arguments name by key (an order id
// in args.order), each as one line — the set, the key and the record's fields —
// for the revision request's "relevant facts", at most max.
func recordFacts(ix *facts.Index, args map[string]string, max int) []interceptors.FactLine {
	if ix.RecordCount() == 0 || len(args) == 0 {
		return nil
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []interceptors.FactLine
	seen := map[string]bool{}
	for _, set := range ix.RecordSets() {
		for _, name := range names {
			rec, ok := ix.Record(set, args[name])
			if !ok || seen[set+"\x00"+rec.Key] || (max > 0 && len(out) >= max) {
				continue
			}
			seen[set+"\x00"+rec.Key] = true
			out = append(out, interceptors.FactLine{Text: recordLine(rec)})
		}
	}
	return out
}

// recordLine renders a record as "orders A-1001: status shipped, total 59.9,
// placed 2026-03-01".
func recordLine(rec facts.Record) string {
	var b strings.Builder
	b.WriteString(rec.Set)
	b.WriteByte(' ')
	b.WriteString(rec.Key)
	b.WriteByte(':')
	first := true
	for _, name := range rec.Fields() {
		v, _ := rec.Field(name)
		if s, ok := v.(string); ok && s == rec.Key {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteByte(' ')
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(refText(types.DefaultTypeAdapter.NativeToValue(v)))
	}
	return b.String()
}

// refText renders an argument: strings as they are, numbers in decimal (two
// decimals for a fractional double), dates as dates, lists joined with ", ".
func refText(v ref.Val) string {
	switch x := v.Value().(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'f', 2, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 && x.Nanosecond() == 0 {
			return x.Format("2006-01-02")
		}
		return x.Format(time.RFC3339)
	}
	if s, err := refStrings(v); err == nil {
		return strings.Join(s, ", ")
	}
	return fmt.Sprint(v.Value())
}

// refStrings reads a CEL list as strings.
func refStrings(v ref.Val) ([]string, error) {
	if v == types.NullValue {
		return nil, nil
	}
	native, err := v.ConvertToNative(stringsType)
	if err != nil {
		return nil, fmt.Errorf("want a list of strings, got a %s", v.Type().TypeName())
	}
	return native.([]string), nil
}

var stringsType = reflect.TypeFor[[]string]()
