// Package rawjson reads and writes JSON text without decoding it: a bounded
// validity check that every JSON factgate reads goes through before any recursive
// code sees it, a walker over the members and elements of valid JSON, and the one
// string encoder the proxy writes JSON strings with.
//
// Recursive JSON code (gjson's validity check, encoding/json's decoder, tree
// builders) uses stack in proportion to the nesting of its input: 5.6 MB of "["
// overflows a goroutine's 1 GB stack and kills the process, which recover cannot
// catch. Check is iterative, runs in time linear in its input with a small
// constant, allocates nothing for valid input nested up to 256 levels, and refuses
// input nested deeper than a bound, so code behind it recurses at most that deep.
//
// The package imports nothing from factgate, so any layer may use it.
package rawjson

import (
	"bytes"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting bound for JSON factgate reads when nothing else is
// configured: 128 levels of objects and arrays. OpenAI's own chat requests nest
// about 20 levels at most (a JSON schema response format in a tool definition).
const DefaultMaxDepth = 128

// ErrTooDeep is wrapped by the *SyntaxError of input nested deeper than the bound
// (errors.Is(err, ErrTooDeep)).
var ErrTooDeep = errors.New("JSON nested too deeply")

// SyntaxError is input that is not valid JSON, or nested deeper than the bound.
type SyntaxError struct {
	// Problem says what is wrong, in encoding/json's words ("invalid character '}'
	// looking for beginning of value", "unexpected end of JSON input"), or "nesting
	// deeper than 128 levels".
	Problem string
	// Offset is the byte offset of the first byte that is wrong: the opening
	// bracket one level too deep, or len(input) when the input ends too early.
	Offset int
	// Line and Column locate Offset, both from 1; the column counts characters
	// (UTF-8 sequences), as editors show it.
	Line, Column int
	// MaxDepth is the bound that was exceeded; 0 for any other problem.
	MaxDepth int
}

// Error is the problem and its position: "nesting deeper than 128 levels at line
// 1, column 129".
func (e *SyntaxError) Error() string { return e.Problem + " at " + e.Position() }

// Position is "line L, column C".
func (e *SyntaxError) Position() string {
	return "line " + strconv.Itoa(e.Line) + ", column " + strconv.Itoa(e.Column)
}

// Unwrap returns ErrTooDeep for a nesting error, nil otherwise.
func (e *SyntaxError) Unwrap() error {
	if e.MaxDepth > 0 {
		return ErrTooDeep
	}
	return nil
}

// Check reports whether b is one valid JSON value (surrounded by optional white
// space) nested at most maxDepth levels deep; maxDepth < 1 means DefaultMaxDepth.
// It accepts exactly what encoding/json's Valid accepts within the bound (strings
// may hold bytes that are not UTF-8). The error is a *SyntaxError.
func Check(b []byte, maxDepth int) error {
	f := scan(b, maxDepth)
	if f.off < 0 {
		return nil
	}
	line := 1 + bytes.Count(b[:f.off], newline)
	start := bytes.LastIndexByte(b[:f.off], '\n') + 1
	return f.err(byteAt(b, f.off), line, 1+utf8.RuneCount(b[start:f.off]))
}

// CheckString is Check for a string.
func CheckString(s string, maxDepth int) error {
	f := scan(s, maxDepth)
	if f.off < 0 {
		return nil
	}
	line := 1 + strings.Count(s[:f.off], "\n")
	start := strings.LastIndexByte(s[:f.off], '\n') + 1
	return f.err(byteAt(s, f.off), line, 1+utf8.RuneCountInString(s[start:f.off]))
}

// Valid is Check without the error: it allocates nothing.
func Valid(b []byte, maxDepth int) bool { return scan(b, maxDepth).off < 0 }

// ValidString is CheckString without the error: it allocates nothing.
func ValidString(s string, maxDepth int) bool { return scan(s, maxDepth).off < 0 }

var newline = []byte{'\n'}

// text is what the scanner reads: one instantiation for strings, one for bytes.
type text interface{ ~string | ~[]byte }

func byteAt[T text](s T, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// problem is what the scanner found wrong; the messages are encoding/json's.
type problem uint8

const (
	probEOF problem = iota
	probBeginValue
	probBeginKey
	probAfterKey
	probAfterPair
	probAfterElement
	probAfterTop
	probString
	probEscape
	probHex
	probNumber
	probAfterDot
	probExponent
	probLiteral
	probDepth
)

// failure is where and why the scan stopped; off < 0 is success.
type failure struct {
	off      int
	prob     problem
	literal  string // probLiteral: the literal being read
	want     byte   // probLiteral: the byte expected
	maxDepth int    // probDepth
}

var success = failure{off: -1}

func (f failure) err(c byte, line, col int) *SyntaxError {
	e := &SyntaxError{Offset: f.off, Line: line, Column: col}
	ch := "invalid character " + quoteChar(c)
	switch f.prob {
	case probEOF:
		e.Problem = "unexpected end of JSON input"
	case probBeginValue:
		e.Problem = ch + " looking for beginning of value"
	case probBeginKey:
		e.Problem = ch + " looking for beginning of object key string"
	case probAfterKey:
		e.Problem = ch + " after object key"
	case probAfterPair:
		e.Problem = ch + " after object key:value pair"
	case probAfterElement:
		e.Problem = ch + " after array element"
	case probAfterTop:
		e.Problem = ch + " after top-level value"
	case probString:
		e.Problem = ch + " in string literal"
	case probEscape:
		e.Problem = ch + " in string escape code"
	case probHex:
		e.Problem = ch + ` in \u hexadecimal character escape`
	case probNumber:
		e.Problem = ch + " in numeric literal"
	case probAfterDot:
		e.Problem = ch + " after decimal point in numeric literal"
	case probExponent:
		e.Problem = ch + " in exponent of numeric literal"
	case probLiteral:
		e.Problem = ch + " in literal " + f.literal + " (expecting " + quoteChar(f.want) + ")"
	case probDepth:
		e.Problem = "nesting deeper than " + strconv.Itoa(f.maxDepth) + " levels"
		e.MaxDepth = f.maxDepth
	}
	return e
}

// quoteChar formats c as encoding/json's errors do.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

// plain marks the bytes a string literal holds without an escape: everything but
// control characters, the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scan checks s in one pass without recursion. The open containers are a bit
// stack (1 = object), on the goroutine's stack up to 256 levels.
func scan[T text](s T, maxDepth int) failure {
	if maxDepth < 1 {
		maxDepth = DefaultMaxDepth
	}
	var small [4]uint64
	objects := small[:]
	depth := 0
	n := len(s)
	i := 0
	for {
		// A value starts at i, after white space.
		for i < n && isSpace(s[i]) {
			i++
		}
		if i >= n {
			return failure{off: n}
		}
		switch c := s[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return failure{off: i, prob: probDepth, maxDepth: maxDepth}
			}
			w, bit := depth>>6, uint64(1)<<(depth&63)
			if w == len(objects) {
				objects = append(objects, 0)
			}
			depth++
			i++
			for i < n && isSpace(s[i]) {
				i++
			}
			if i >= n {
				return failure{off: n}
			}
			if c == '[' {
				objects[w] &^= bit
				if s[i] == ']' {
					depth--
					i++
					break // to the value's end
				}
				continue // the first element
			}
			objects[w] |= bit
			if s[i] == '}' {
				depth--
				i++
				break
			}
			var f failure
			if i, f = scanKey(s, i); f.off >= 0 {
				return f
			}
			continue // the first member's value
		case '"':
			end := stringLiteralEnd(s, i)
			if end < 0 {
				_, f := stringFailure(s, i)
				return f
			}
			i = end
		case 't':
			var f failure
			if i, f = scanLiteral(s, i, "true"); f.off >= 0 {
				return f
			}
		case 'f':
			var f failure
			if i, f = scanLiteral(s, i, "false"); f.off >= 0 {
				return f
			}
		case 'n':
			var f failure
			if i, f = scanLiteral(s, i, "null"); f.off >= 0 {
				return f
			}
		default:
			if c != '-' && !isDigit(c) {
				return failure{off: i, prob: probBeginValue}
			}
			var f failure
			if i, f = scanNumber(s, i); f.off >= 0 {
				return f
			}
		}
		// A value ended at i: close containers until the next value starts.
		for {
			for i < n && isSpace(s[i]) {
				i++
			}
			if depth == 0 {
				if i < n {
					return failure{off: i, prob: probAfterTop}
				}
				return success
			}
			if i >= n {
				return failure{off: n}
			}
			top := depth - 1
			inObject := objects[top>>6]&(1<<(top&63)) != 0
			c := s[i]
			if c == ',' {
				i++
				if inObject {
					for i < n && isSpace(s[i]) {
						i++
					}
					var f failure
					if i, f = scanKey(s, i); f.off >= 0 {
						return f
					}
				}
				break // the next value
			}
			switch {
			case inObject && c == '}', !inObject && c == ']':
				depth--
				i++
			case inObject:
				return failure{off: i, prob: probAfterPair}
			default:
				return failure{off: i, prob: probAfterElement}
			}
		}
	}
}

// scanKey reads an object key and its colon at s[i:], after white space; it
// returns the index after the colon.
func scanKey[T text](s T, i int) (int, failure) {
	n := len(s)
	if i >= n {
		return i, failure{off: n}
	}
	if s[i] != '"' {
		return i, failure{off: i, prob: probBeginKey}
	}
	end := stringLiteralEnd(s, i)
	if end < 0 {
		return stringFailure(s, i)
	}
	i = end
	for i < n && isSpace(s[i]) {
		i++
	}
	if i >= n {
		return i, failure{off: n}
	}
	if s[i] != ':' {
		return i, failure{off: i, prob: probAfterKey}
	}
	return i + 1, success
}

// stringLiteralEnd reads the string literal whose quote is s[i]: it returns the
// index after the closing quote, or -1 when the literal is not valid
// (stringFailure then says why). An operation log has an escape ("\n") every
// line or so: each is stepped over where it stands and the word loop goes on, with
// no failure built on the way.
func stringLiteralEnd[T text](s T, i int) int {
	n := len(s)
	i++
	k := wordMasks // in registers for the loop (see wordMasks)
	for {
		// Sixteen bytes at a time, up to the first byte that ends the plain run
		// (as plainEnd, written out here: the call costs Check ~10% on strings).
		for i+16 <= n {
			m0, m1 := k.special(load8(s, i)), k.special(load8(s, i+8))
			if m0 != 0 {
				i += bits.TrailingZeros64(m0) >> 3
				goto special
			}
			if m1 != 0 {
				i += 8 + bits.TrailingZeros64(m1)>>3
				goto special
			}
			i += 16
		}
		for i < n && plain[s[i]] {
			i++
		}
	special:
		if i+1 >= n { // the end, or a last byte that cannot end a string
			if i < n && s[i] == '"' {
				return i + 1
			}
			return -1
		}
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			if shortEscape[s[i+1]] != 0 {
				i += 2
				continue
			}
			if s[i+1] == 'u' && i+5 < n && isHex(s[i+2]) && isHex(s[i+3]) && isHex(s[i+4]) && isHex(s[i+5]) {
				i += 6
				continue
			}
		}
		return -1
	}
}

// stringFailure reads the string literal whose quote is s[i] as
// stringLiteralEnd does, one escape at a time, and says what is wrong with it:
// it returns the index after the closing quote and success for a valid literal,
// else the offset where it stopped and the failure.
func stringFailure[T text](s T, i int) (int, failure) {
	n := len(s)
	i++
	for {
		i = plainEndOf(s, i)
		if i >= n {
			return i, failure{off: n}
		}
		switch s[i] {
		case '"':
			return i + 1, success
		case '\\':
			i++
			if i >= n {
				return i, failure{off: n}
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= n {
						return i, failure{off: n}
					}
					if !isHex(s[i+k]) {
						return i, failure{off: i + k, prob: probHex}
					}
				}
				i += 5
			default:
				return i, failure{off: i, prob: probEscape}
			}
		default: // a control character
			return i, failure{off: i, prob: probString}
		}
	}
}

// plainEnd returns the offset of the first byte at or after s[i] that a string
// literal cannot hold as it is (a control character, the quote or the
// backslash), or len(s): the end of a run of plain bytes. It is stringFailure's
// inner loop, for the Walker to find a string without escapes in one read.
func plainEnd(s string, i int) int { return plainEndOf(s, i) }

func plainEndOf[T text](s T, i int) int {
	n := len(s)
	k := wordMasks // in registers for the loop
	// Eight bytes at a time, up to the first that ends the plain run.
	for i+8 <= n {
		if m := k.special(load8(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < n && plain[s[i]] {
		i++
	}
	return i
}

// load8 reads the eight bytes at s[i:] as a little-endian word.
func load8[T text](s T, i int) uint64 {
	w := s[i : i+8] // one bounds check: the compiler merges the loads into one
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// specialMask sets the high bit of each of the eight bytes of v that is not
// plain — a control character, the quote or the backslash — at least of the first
// one (in string order): each test sets a byte's high bit where it holds, and a
// subtraction's borrow can only set bits above a byte that holds, so the lowest
// bit set is exact (bits.TrailingZeros64(m)>>3 is that byte's index). A byte that
// has its own high bit set (UTF-8) is plain and masked out. Zero: all are plain.
//
// One test finds the control characters and the quote: flipping bit 1 maps the
// quote (0x22) to 0x20 and the control characters onto themselves, so that they
// are exactly the bytes below 0x21 after the flip.
func specialMask(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	controlOrQuote := (v ^ 0x02*ones) - 0x21*ones
	backslash := (v ^ '\\'*ones) - ones
	return (controlOrQuote | backslash) &^ v & highs
}

// masks are specialMask's constants, for a loop to hold in registers: the
// compiler writes a constant as a ten-byte immediate at each use in each pass
// (stringLiteralEnd took a third longer on 24 KB without escapes); the fields of
// a variable's copy it keeps in registers. Never written.
type masks struct{ flip, below, backslash, ones, highs uint64 }

var wordMasks = masks{flip: 0x0202020202020202, below: 0x2121212121212121, backslash: 0x5c5c5c5c5c5c5c5c, ones: 0x0101010101010101, highs: 0x8080808080808080}

// special is specialMask(v).
func (k *masks) special(v uint64) uint64 {
	return (((v ^ k.flip) - k.below) | ((v ^ k.backslash) - k.ones)) &^ v & k.highs
}

// scanLiteral reads true, false or null at s[i].
func scanLiteral[T text](s T, i int, lit string) (int, failure) {
	n := len(s)
	for k := 1; k < len(lit); k++ {
		if i+k >= n {
			return i, failure{off: n}
		}
		if s[i+k] != lit[k] {
			return i, failure{off: i + k, prob: probLiteral, literal: lit, want: lit[k]}
		}
	}
	return i + len(lit), success
}

// scanNumber reads the number at s[i] (a '-' or a digit).
func scanNumber[T text](s T, i int) (int, failure) {
	n := len(s)
	if s[i] == '-' {
		i++
		if i >= n {
			return i, failure{off: n}
		}
		if !isDigit(s[i]) {
			return i, failure{off: i, prob: probNumber}
		}
	}
	if s[i] == '0' {
		i++
	} else {
		for i < n && isDigit(s[i]) {
			i++
		}
	}
	if i < n && s[i] == '.' {
		i++
		if i >= n {
			return i, failure{off: n}
		}
		if !isDigit(s[i]) {
			return i, failure{off: i, prob: probAfterDot}
		}
		for i < n && isDigit(s[i]) {
			i++
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= n {
			return i, failure{off: n}
		}
		if !isDigit(s[i]) {
			return i, failure{off: i, prob: probExponent}
		}
		for i < n && isDigit(s[i]) {
			i++
		}
	}
	return i, success
}
