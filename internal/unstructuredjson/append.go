// Package unstructuredjson writes the JSON of unstructured content (the
// map[string]interface{} of an unstructured.Unstructured) byte for byte as
// encoding/json writes it: keys sorted, HTML-sensitive characters escaped,
// numbers as encoding/json formats them.
//
// encoding/json reaches every value of such a map through reflection: it
// allocates a sorted copy of each map's keys and values and a reflect
// value for each element, about ninety allocations for a small ConfigMap.
// The loop encodes every child it compares, applies or sends to a hook,
// and those allocations were the largest share of what the collector
// then had to find again. Append switches on the types JSON decoding
// produces and sorts keys on the stack; any other value (an int from an
// in-process hook, a json.Marshaler, NaN) it hands to encoding/json, so
// that what it cannot write itself is still written, or refused, exactly
// as json.Marshal would.
package unstructuredjson

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth is how deep Append nests before it hands a value to
// encoding/json, which detects cycles from that depth (its
// startDetectingCyclesAfter), so that a cyclic map an in-process hook
// built is refused rather than overflowing the stack.
const maxDepth = 1000

// Marshal is json.Marshal(v), for unstructured content.
func Marshal(v interface{}) ([]byte, error) {
	return Append(nil, v)
}

// Append appends json.Marshal(v)'s bytes to dst. On an error dst is
// returned as it was, with the error json.Marshal returns.
func Append(dst []byte, v interface{}) ([]byte, error) {
	out, err := appendValue(dst, v, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendValue(dst []byte, v interface{}, depth int) ([]byte, error) {
	if depth > maxDepth {
		return appendMarshalled(dst, v)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return appendMarshalled(dst, v)
		}
		return appendFloat(dst, v), nil
	case map[string]interface{}:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendMap(dst, v, depth+1)
	case []interface{}:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	default:
		return appendMarshalled(dst, v)
	}
}

// appendMarshalled appends what encoding/json writes for v, a value of a
// type Append does not write itself.
func appendMarshalled(dst []byte, v interface{}) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, data...), nil
}

// appendMap writes m's keys in encoding/json's order (strings.Compare),
// sorted in a stack buffer for the maps of a Kubernetes object, which
// rarely have more than sixteen keys.
func appendMap(dst []byte, m map[string]interface{}, depth int) ([]byte, error) {
	var stack [16]string
	keys := stack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendValue(dst, m[k], depth); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendFloat is encoding/json's float64 encoding: as ES6 converts a
// number to a string, like %g with other exponent cutoffs and no padding
// of the exponent.
func appendFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hex = "0123456789abcdef"

// appendString is encoding/json's string encoding with HTML escaping (as
// json.Marshal does): control characters, quote and backslash escaped,
// <, > and & as \u003c, \u003e and \u0026, U+2028 and U+2029 escaped,
// and invalid UTF-8 replaced by \ufffd.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// htmlSafe is encoding/json's htmlSafeSet: every ASCII character but the
// controls, the quote, the backslash, <, > and &.
func htmlSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}
