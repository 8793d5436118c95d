package patches

import (
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/composite-apiserver/composite-apiserver/internal/diffline"
)

// Diff lists the fields that differ between two objects, one a line, in the
// format of a plan item's diff: `data.color: "blue" -> "green"`,
// `metadata.labels["app.kubernetes.io/name"]: <none> -> "x"`, `- data.old:
// "x"`. Maps are compared field by field, lists of the same length element
// by element (`spec.ports[0].port: 80 -> 8080`), other lists whole. It is
// for people reading what a patch did; what is applied is decided by
// internal/engine with structured-merge-diff.
func Diff(before, after map[string]interface{}) []string {
	d := differ{}
	d.value(before, after)
	return d.lines
}

// DiffWithin is Diff when before and after can only differ within the
// given subtrees (JSON pointers' tokens): the same lines, without walking
// the rest of the objects.
func DiffWithin(before, after map[string]interface{}, roots []pointer) []string {
	mask := &subtree{}
	for _, r := range roots {
		mask.insert(r)
	}
	d := differ{}
	d.within(before, after, mask)
	return d.lines
}

// subtree marks where a diff must look: below a leaf, everything; elsewhere
// only the children.
type subtree struct {
	leaf     bool
	children []subtreeChild
}

// subtreeChild is a child of a subtree; a handful at most, so a list.
type subtreeChild struct {
	token string
	tree  *subtree
}

// child is the subtree below tok; nil (everywhere) below a nil subtree.
func (s *subtree) child(tok string) *subtree {
	if s == nil {
		return nil
	}
	for _, c := range s.children {
		if c.token == tok {
			return c.tree
		}
	}
	return nil
}

func (s *subtree) insert(p pointer) {
	for _, tok := range p {
		if s.leaf {
			return
		}
		next := s.child(tok)
		if next == nil {
			next = &subtree{}
			s.children = append(s.children, subtreeChild{token: tok, tree: next})
		}
		s = next
	}
	s.leaf, s.children = true, nil
}

// differ walks two values, keeping the path to where it is as segments, so
// that a path is only written out for a line.
type differ struct {
	path  []string
	lines []string
}

func (d *differ) value(before, after interface{}) { d.within(before, after, nil) }

// within diffs before and after where mask says (nil: everywhere).
func (d *differ) within(before, after interface{}, mask *subtree) {
	if mask != nil && mask.leaf {
		mask = nil
	}
	if equal(before, after) {
		// Most of an object is what it was: no need to sort its keys.
		return
	}
	bm, bIsMap := before.(map[string]interface{})
	am, aIsMap := after.(map[string]interface{})
	if bIsMap && aIsMap {
		var keys []string
		if mask != nil {
			keys = make([]string, 0, len(mask.children))
			for _, c := range mask.children {
				keys = append(keys, c.token)
			}
		} else {
			keys = make([]string, 0, len(bm)+len(am))
			for k := range bm {
				keys = append(keys, k)
			}
			for k := range am {
				if _, ok := bm[k]; !ok {
					keys = append(keys, k)
				}
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			bv, inBefore := bm[k]
			av, inAfter := am[k]
			d.path = append(d.path, diffline.Key(k))
			switch {
			case !inBefore && !inAfter:
			case !inAfter:
				d.lines = append(d.lines, "- "+d.pathString()+": "+diffline.Render(bv))
			case !inBefore:
				d.lines = append(d.lines, d.pathString()+": "+diffline.NoValue+" -> "+diffline.Render(av))
			default:
				d.within(bv, av, mask.child(k))
			}
			d.path = d.path[:len(d.path)-1]
		}
		return
	}
	bl, bIsList := before.([]interface{})
	al, aIsList := after.([]interface{})
	if bIsList && aIsList && len(bl) == len(al) {
		for i := range bl {
			var elem *subtree
			if mask != nil {
				if elem = mask.child(strconv.Itoa(i)); elem == nil {
					continue
				}
			}
			d.path = append(d.path, "["+strconv.Itoa(i)+"]")
			d.within(bl[i], al[i], elem)
			d.path = d.path[:len(d.path)-1]
		}
		return
	}
	d.lines = append(d.lines, d.pathString()+": "+diffline.Render(before)+" -> "+diffline.Render(after))
}

// equal compares JSON values: maps and lists element by element, numbers
// by value whatever their Go type.
func equal(a, b interface{}) bool {
	switch a := a.(type) {
	case map[string]interface{}:
		bm, ok := b.(map[string]interface{})
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case []interface{}:
		bl, ok := b.([]interface{})
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !equal(a[i], bl[i]) {
				return false
			}
		}
		return true
	case string:
		s, ok := b.(string)
		return ok && a == s
	case bool:
		v, ok := b.(bool)
		return ok && a == v
	case nil:
		return b == nil
	case int64:
		if v, ok := b.(int64); ok {
			return a == v
		}
	}
	return reflect.DeepEqual(a, b) || diffline.Render(a) == diffline.Render(b)
}

// pathString writes the path: keys joined with dots, quoted in brackets
// when they are not plain identifiers (metadata.labels["a.b/c"]), list
// positions in brackets.
func (d *differ) pathString() string {
	var b strings.Builder
	for i, seg := range d.path {
		if i > 0 && seg[0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
