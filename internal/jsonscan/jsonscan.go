// Package jsonscan scans JSON in place, accepting exactly what encoding/json's scanner accepts
// (the agent's FuzzLineFields compares them), and unquotes its strings as encoding/json does:
// the agent's view of a JSON line (linerecord/fields.go) and the docker json-file decoder
// (filetail/container.go) share it. Each scanning function takes b[i] as the first byte of what
// it scans and returns the index just past it, or -1 when b is not valid there.
package jsonscan

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// IsSpace reports whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Member is where one member of an object lies (Object's members), as indexes of its bytes.
type Member struct {
	KeyStart, KeyEnd int  // the key's bytes between its quotes
	PlainKey         bool // no escape, no byte >= 0x80: the key's bytes are its name as they are
	ValStart, ValEnd int  // the value as written, without the space around it
}

// MaxNestingDepth is encoding/json's limit on nested objects and arrays (scanner.go): a value
// nested deeper is not valid JSON to it, nor to Object and Value.
const MaxNestingDepth = 10000

// UnquoteRune returns the character at s[r] of valid JSON string contents and the index past
// it, as encoding/json's unquoteBytes decodes it: escapes resolved, a surrogate pair joined, a
// lone surrogate and a byte that is not UTF-8 each U+FFFD.
func UnquoteRune(s []byte, r int) (rune, int) {
	c := s[r]
	if c < utf8.RuneSelf && c != '\\' {
		return rune(c), r + 1
	}
	if c != '\\' {
		rr, size := utf8.DecodeRune(s[r:])
		return rr, r + size
	}
	switch s[r+1] {
	case 'b':
		return '\b', r + 2
	case 'f':
		return '\f', r + 2
	case 'n':
		return '\n', r + 2
	case 'r':
		return '\r', r + 2
	case 't':
		return '\t', r + 2
	case 'u':
		rr := getu4(s[r:])
		r += 6
		if utf16.IsSurrogate(rr) {
			if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
				return dec, r + 6
			}
			return unicode.ReplacementChar, r
		}
		return rr, r
	}
	return rune(s[r+1]), r + 2 // '"', '\\', '/'
}

// getu4 decodes the \uXXXX escape at the start of s, -1 if there is none (encoding/json's).
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// The validator below accepts exactly what encoding/json's scanner accepts (FuzzLineFields
// compares them): each function takes b[i] as the first byte of what it scans and returns the
// index just past it, or -1 when b is not valid there.

// SkipSpace returns the index of the first byte at or after i that is not JSON space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// Value scans the value at b[i], inside depth nested objects and arrays.
func Value(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		end, _ := String(b, i)
		return end
	case '{':
		return Object(b, i, depth+1, nil)
	case '[':
		return scanArray(b, i, depth+1)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return scanNumber(b, i)
		}
	}
	return -1
}

// Object scans the object at b[i] (a '{'), its depth-th level of nesting; with members it
// appends where each of its members lies.
func Object(b []byte, i, depth int, members *[]Member) int {
	if depth > MaxNestingDepth {
		return -1
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		keyEnd, plain := String(b, i)
		if keyEnd < 0 {
			return -1
		}
		j := SkipSpace(b, keyEnd)
		if j >= len(b) || b[j] != ':' {
			return -1
		}
		valStart := SkipSpace(b, j+1)
		valEnd := Value(b, valStart, depth)
		if valEnd < 0 {
			return -1
		}
		if members != nil {
			*members = append(*members, Member{
				KeyStart: i + 1, KeyEnd: keyEnd - 1, PlainKey: plain,
				ValStart: valStart, ValEnd: valEnd,
			})
		}
		i = SkipSpace(b, valEnd)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// scanArray scans the array at b[i] (a '['), its depth-th level of nesting.
func scanArray(b []byte, i, depth int) int {
	if depth > MaxNestingDepth {
		return -1
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		end := Value(b, i, depth)
		if end < 0 {
			return -1
		}
		i = SkipSpace(b, end)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// stringByte marks the bytes a string's fast loop stops at: the closing quote, an escape, a
// control character (invalid in a string) and a byte >= 0x80 (a key with one is not plain).
var stringByte = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// String scans the string at b[i] (a '"'); plain reports that it has no escape and no byte
// >= 0x80, so that its bytes are its value. Bytes that are not UTF-8 are valid, as they are to
// encoding/json (which decodes them as U+FFFD).
func String(b []byte, i int) (end int, plain bool) {
	plain = true
	for i++; i < len(b); {
		for i < len(b) && !stringByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, plain
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return -1, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if getu4(b[i:]) < 0 {
					return -1, false
				}
				i += 6
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		default: // >= 0x80
			plain = false
			i++
		}
	}
	return -1, false
}

// scanNumber scans the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. What may
// follow it is the caller's to check, as for every value.
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral scans lit (true, false or null) at b[i].
func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
