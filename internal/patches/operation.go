package patches

import (
	"fmt"
	"strconv"
	"strings"
)

// pointer is a parsed JSON pointer (RFC 6901): its reference tokens,
// unescaped.
type pointer []string

// parsePointer parses a JSON pointer into its tokens. The root ("") is not
// a place an inline patch may write to.
func parsePointer(p string) (pointer, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path %q is not a JSON pointer: it must start with '/'", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, tok := range tokens {
		if strings.Contains(tok, "~") {
			for j := 0; j < len(tok); j++ {
				if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
					return nil, fmt.Errorf("path %q is not a JSON pointer: '~' must be followed by '0' or '1'", p)
				}
			}
			tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
	}
	return tokens, nil
}

// index reads tok as an index of a list of n elements: RFC 6901 array
// indices are decimal, without leading zeros; "-" (after the last element)
// only where end allows it, as the position an add appends at.
func index(tok string, n int, end bool) (int, error) {
	if tok == "-" && end {
		return n, nil
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || (len(tok) > 1 && tok[0] == '0') || tok[0] == '+' {
		return 0, fmt.Errorf("%q is not an index of a list", tok)
	}
	limit := n
	if end {
		limit = n + 1
	}
	if i >= limit {
		return 0, fmt.Errorf("index %d is out of the list's bounds (%d elements)", i, n)
	}
	return i, nil
}

// applyOperation applies one RFC 6902 add, replace or remove to doc, with
// the semantics of the RFC: add creates or replaces an object member or
// inserts into a list, and needs the container to exist; replace and remove
// need the target to exist. doc is not modified: the result is a new
// document that shares with doc everything the operation does not change,
// copying only the objects and lists on the way to the target (most of a
// child is never copied). Nothing is ever changed in place, so sharing is
// safe. value is used as it is: the caller gives each document a value of
// its own.
func applyOperation(doc map[string]interface{}, op string, path pointer, value interface{}) (map[string]interface{}, error) {
	if len(path) == 0 {
		return nil, fmt.Errorf("the whole object can't be patched")
	}
	out, err := applyAt(doc, op, path, 0, value)
	if err != nil {
		return nil, err
	}
	return out.(map[string]interface{}), nil
}

// applyAt applies op to the target path[depth:] in container (the value at
// path[:depth]) and returns the changed copy of container.
func applyAt(container interface{}, op string, path pointer, depth int, value interface{}) (interface{}, error) {
	switch c := container.(type) {
	case map[string]interface{}:
		return applyInObject(c, op, path, depth, value)
	case []interface{}:
		return applyInList(c, op, path, depth, value)
	default:
		return nil, fmt.Errorf("%s does not exist: %s is neither an object nor a list", describePointer(path[:depth+1]), describePointer(path[:depth]))
	}
}

// applyInObject is applyAt in an object: the member path[depth] is the
// target, or holds it.
func applyInObject(c map[string]interface{}, op string, path pointer, depth int, value interface{}) (interface{}, error) {
	tok := path[depth]
	here := func() string { return describePointer(path[:depth+1]) }
	cur, exists := c[tok]
	out := make(map[string]interface{}, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	switch {
	case depth < len(path)-1:
		if !exists {
			return nil, fmt.Errorf("%s does not exist", here())
		}
		next, err := applyAt(cur, op, path, depth+1, value)
		if err != nil {
			return nil, err
		}
		out[tok] = next
	case op == "add":
		out[tok] = value
	case op == "replace":
		if !exists {
			return nil, fmt.Errorf("%s does not exist, so it can't be replaced", here())
		}
		out[tok] = value
	case op == "remove":
		if !exists {
			return nil, fmt.Errorf("%s does not exist, so it can't be removed", here())
		}
		delete(out, tok)
	default:
		return nil, fmt.Errorf("op %q is not supported", op)
	}
	return out, nil
}

// applyInList is applyAt in a list: the item path[depth] is the target,
// or holds it; "add" inserts before it ("-": at the end).
func applyInList(c []interface{}, op string, path pointer, depth int, value interface{}) (interface{}, error) {
	last := depth == len(path)-1
	if last && op != "add" && op != "replace" && op != "remove" {
		return nil, fmt.Errorf("op %q is not supported", op)
	}
	i, err := index(path[depth], len(c), last && op == "add")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", describePointer(path[:depth+1]), err)
	}
	switch {
	case !last:
		next, err := applyAt(c[i], op, path, depth+1, value)
		if err != nil {
			return nil, err
		}
		out := append([]interface{}(nil), c...)
		out[i] = next
		return out, nil
	case op == "add":
		out := make([]interface{}, 0, len(c)+1)
		return append(append(append(out, c[:i]...), value), c[i:]...), nil
	case op == "replace":
		out := append([]interface{}(nil), c...)
		out[i] = value
		return out, nil
	default: // remove
		return append(append(make([]interface{}, 0, len(c)-1), c[:i]...), c[i+1:]...), nil
	}
}

// describePointer names a place for people: the pointer, escaped again.
func describePointer(p pointer) string {
	if len(p) == 0 {
		return "the object"
	}
	var b strings.Builder
	for _, tok := range p {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// copyValue deep-copies a JSON value (maps, lists, scalars as decoding
// gives them), so that no two children share a map or list that a later
// patch could change in one of them.
func copyValue(v interface{}) interface{} {
	switch v := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			out[k] = copyValue(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	default:
		return v
	}
}
