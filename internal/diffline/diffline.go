// Package diffline is the format of the lines a plan's diff shows, one
// changed field a line: `data.color: "blue" -> "green"`,
// `metadata.labels["app.kubernetes.io/name"]: <none> -> "x"`,
// `- data.old: "x"`. The field-ownership comparison (internal/fieldowner) and
// the patch pipeline (internal/patches) write them; kubectl composite
// (internal/plugin) reads them back.
package diffline

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// NoValue stands for a field that is not set.
const NoValue = "<none>"

// Render writes a value as JSON.
func Render(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// Key is a map key as a path segment: the key itself when it is an
// identifier (joined to the path with a dot), quoted in brackets otherwise
// (metadata.labels["a.b/c"]).
func Key(k string) string {
	if PlainKey(k) {
		return k
	}
	return "[" + strconv.Quote(k) + "]"
}

// PlainKey tells whether k is an identifier, [A-Za-z_][A-Za-z0-9_-]*.
func PlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}
