// Package jsonobject decodes JSON objects in one pass into the maps
// sigs.k8s.io/json.UnmarshalCaseSensitivePreserveInts makes of them (keys
// case-sensitive, the last of duplicate keys kept, whole numbers that fit
// int64 as int64, every other number float64): the maps the dynamic
// client's decoder, and Unstructured.UnmarshalJSON, make. encoding/json
// decodes through reflection, scanning each value twice (once to check it,
// once to build it), and an Unstructured's bytes once more; this decoder
// reads each byte once.
//
// It refuses (ErrNotDecoded) what it does not decode exactly as that
// function would (a lone UTF-16 surrogate, bytes that are not UTF-8,
// nesting deeper than maxDepth) as well as what is not JSON; its caller
// then decodes the same bytes with sigs.k8s.io/json, which decodes the
// first and says what is wrong with the rest. It never accepts what that
// function refuses.
package jsonobject

import (
	"errors"
	"hash/maphash"
	"strconv"
	"sync/atomic"
	"unicode/utf8"
)

// Decode decodes the JSON object data. Every map and slice it returns is
// its own, for the caller to change; its strings, which no one can
// change, are shared with the equal strings decoded recently
// (internedStrings): every object of a kind repeats the same keys
// ("apiVersion", "metadata", "f:data", ...) and many of the same values
// ("v1", a namespace, an owner's name and UID, a field manager), and a
// string seen again costs neither its bytes nor its interface box.
func Decode(data []byte) (map[string]interface{}, error) {
	d := decoder{data: data}
	return d.topObject(nil)
}

// DecodeShared decodes the JSON object data as Decode does, and also
// shares the values of a few metadata keys (sharedKey) whole with the
// last equal one decoded from the same bytes (sharedValues): the children
// a parent's sync applies have the same labels, the same owner references
// and, most often, the same managedFields, so an informer's cache holds
// one set of those maps for a parent's ten children, not ten, and a value
// seen before is not decoded again (in B4, 0.54× the heap per cached
// child it took without; sharing the managedFields lists whole, 0.89×
// that). So what it returns must be read and never changed, as every
// object an informer's cache holds (what changes a cached object copies
// it first): a map changed in place would change its siblings too.
func DecodeShared(data []byte) (map[string]interface{}, error) {
	d := decoder{data: data, shared: true}
	return d.topObject(nil)
}

// DecodeMembers decodes the JSON object data as Decode does, and calls
// member with each of its members in the order they are written, a
// repeated key each time: its key, its value and the bytes the value was
// decoded from (a slice of data, to be read before member returns). An
// error member returns ends the decoding, and DecodeMembers returns it.
func DecodeMembers(data []byte, member func(key string, value interface{}, raw []byte) error) error {
	d := decoder{data: data}
	_, err := d.topObject(member)
	return err
}

// topObject decodes the object data holds, with nothing but space around
// it, calling member (when not nil) with each of its members.
func (d *decoder) topObject(member func(key string, value interface{}, raw []byte) error) (map[string]interface{}, error) {
	d.skipSpace()
	if d.peek() != '{' {
		return nil, ErrNotDecoded
	}
	d.member = member
	obj, err := d.object(0)
	if err != nil {
		return nil, err
	}
	if d.skipSpace(); d.pos != len(d.data) {
		return nil, ErrNotDecoded
	}
	return obj, nil
}

// ErrNotDecoded is the decoders' one error: what is wrong is for
// sigs.k8s.io/json to say.
var ErrNotDecoded = errors.New("not decoded in one pass")

// maxDepth is encoding/json's limit of nested objects and arrays.
const maxDepth = 10000

type decoder struct {
	data []byte
	pos  int
	// shared: DecodeShared's decoder, sharing sharedKey's values.
	shared bool
	// member, when not nil, is called with each member of the top object.
	member func(key string, value interface{}, raw []byte) error
	// scratch holds a string with escapes while it is unescaped.
	scratch []byte
}

func (d *decoder) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value decodes the value at d.pos.
func (d *decoder) value(depth int) (interface{}, error) {
	switch c := d.peek(); {
	case c == '{':
		obj, err := d.object(depth)
		if err != nil {
			return nil, err
		}
		return obj, nil
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, ErrNotDecoded
}

func (d *decoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return ErrNotDecoded
	}
	d.pos += len(word)
	return nil
}

// object decodes the object whose '{' is at d.pos.
func (d *decoder) object(depth int) (map[string]interface{}, error) {
	if depth++; depth > maxDepth {
		return nil, ErrNotDecoded
	}
	d.pos++
	obj := map[string]interface{}{}
	d.skipSpace()
	if d.peek() == '}' {
		d.pos++
		return obj, nil
	}
	for {
		if d.peek() != '"' {
			return nil, ErrNotDecoded
		}
		raw, err := d.strBytes()
		if err != nil {
			return nil, err
		}
		// Not string(raw) first: that would copy every key, shared or not.
		var key string
		if len(raw) <= maxInterned {
			key = internedStrings.get(raw).(string)
		} else {
			key = string(raw)
		}
		d.skipSpace()
		if d.peek() != ':' {
			return nil, ErrNotDecoded
		}
		d.pos++
		d.skipSpace()
		start := d.pos
		var v interface{}
		if c := d.peek(); d.shared && depth <= maxSharedDepth && (c == '{' || c == '[') && sharedKey(key) {
			v, err = d.sharedComposite(depth)
		} else {
			v, err = d.value(depth)
		}
		if err != nil {
			return nil, err
		}
		if depth == 1 && d.member != nil {
			if err := d.member(key, v, d.data[start:d.pos]); err != nil {
				return nil, err
			}
		}
		obj[key] = v
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
			d.skipSpace()
		case '}':
			d.pos++
			return obj, nil
		default:
			return nil, ErrNotDecoded
		}
	}
}

// array decodes the array whose '[' is at d.pos, as encoding/json does:
// never nil, so an empty array stays an empty array.
func (d *decoder) array(depth int) ([]interface{}, error) {
	if depth++; depth > maxDepth {
		return nil, ErrNotDecoded
	}
	d.pos++
	arr := []interface{}{}
	d.skipSpace()
	if d.peek() == ']' {
		d.pos++
		return arr, nil
	}
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
			d.skipSpace()
		case ']':
			d.pos++
			return arr, nil
		default:
			return nil, ErrNotDecoded
		}
	}
}

// str decodes the string at d.pos into an interface value, shared with
// the equal strings decoded before it when it is short.
func (d *decoder) str() (interface{}, error) {
	raw, err := d.strBytes()
	if err != nil {
		return nil, err
	}
	if len(raw) > maxInterned {
		return string(raw), nil
	}
	return internedStrings.get(raw), nil
}

// strBytes is the content of the string at d.pos, unescaped: a slice of
// the input, or, once it meets an escape, of the scratch buffer (valid
// until the next string).
func (d *decoder) strBytes() ([]byte, error) {
	d.pos++
	start := d.pos
	escaped := false
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			if escaped {
				return d.scratch, nil
			}
			return d.data[start : d.pos-1], nil
		case c == '\\':
			if !escaped {
				d.scratch = append(d.scratch[:0], d.data[start:d.pos]...)
				escaped = true
			}
			if d.pos+1 >= len(d.data) {
				return nil, ErrNotDecoded
			}
			if err := d.escape(d.data[d.pos+1]); err != nil {
				return nil, err
			}
			continue
		case c < 0x20:
			return nil, ErrNotDecoded
		}
		size := 1
		if c >= utf8.RuneSelf {
			var ok bool
			if size, ok = d.runeSize(); !ok {
				return nil, ErrNotDecoded
			}
		}
		if escaped {
			d.scratch = append(d.scratch, d.data[d.pos:d.pos+size]...)
		}
		d.pos += size
	}
	return nil, ErrNotDecoded
}

// runeSize is the length of the UTF-8 encoding of the rune at d.pos, or
// false when its bytes are not UTF-8: encoding/json replaces them, this
// decoder leaves that to it.
func (d *decoder) runeSize() (int, bool) {
	r, size := utf8.DecodeRune(d.data[d.pos:])
	return size, r != utf8.RuneError || size != 1
}

// escape appends what the escape at d.pos (its letter e) stands for, and
// moves past it.
func (d *decoder) escape(e byte) error {
	if c, ok := simpleEscape(e); ok {
		d.scratch = append(d.scratch, c)
		d.pos += 2
		return nil
	}
	if e != 'u' || d.pos+6 > len(d.data) {
		return ErrNotDecoded
	}
	r, err := strconv.ParseUint(string(d.data[d.pos+2:d.pos+6]), 16, 16)
	// A surrogate pair (or a lone surrogate, which encoding/json
	// replaces) is left to encoding/json.
	if err != nil || (r >= 0xd800 && r < 0xe000) {
		return ErrNotDecoded
	}
	d.scratch = utf8.AppendRune(d.scratch, rune(r))
	d.pos += 6
	return nil
}

// simpleEscape is the byte a one-letter escape stands for.
func simpleEscape(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// number decodes the number at d.pos as encoding/json's decoder does with
// sigs.k8s.io/json's PreserveInts: int64 when it has no '.' and fits,
// float64 otherwise (an exponent makes a float64 too, as ParseInt refuses
// it), and an error when it does not fit a float64.
func (d *decoder) number() (interface{}, error) {
	start := d.pos
	if d.peek() == '-' {
		d.pos++
	}
	switch c := d.peek(); {
	case c == '0':
		d.pos++
	case c >= '1' && c <= '9':
		d.digits()
	default:
		return nil, ErrNotDecoded
	}
	fraction := false
	if d.peek() == '.' {
		d.pos++
		fraction = true
		if !d.digits() {
			return nil, ErrNotDecoded
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.pos++
		if c := d.peek(); c == '+' || c == '-' {
			d.pos++
		}
		if !d.digits() {
			return nil, ErrNotDecoded
		}
	}
	text := string(d.data[start:d.pos])
	if !fraction {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, ErrNotDecoded
	}
	return f, nil
}

// digits moves past the digits at d.pos, telling whether there was one.
func (d *decoder) digits() bool {
	start := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos > start
}

// maxInterned is the longest string shared: longer ones (a ConfigMap's
// data, a certificate) seldom repeat, and would only take a
// slot a key or a short value could use.
const maxInterned = 64

// internedStrings are the strings decoded recently, each as the interface
// value the decoded maps hold, so that a string seen again costs neither
// its bytes nor its interface box.
var internedStrings = newStringTable()

// stringTable is a fixed number of slots, each holding the last string
// whose hash chose it: no lock, no growth, and a string that is not seen
// again (a UID, a resourceVersion) is soon replaced. A miss costs what
// decoding the string costs without the table.
type stringTable struct {
	seed  maphash.Seed
	slots [1 << 13]atomic.Value
}

func newStringTable() *stringTable {
	return &stringTable{seed: maphash.MakeSeed()}
}

// get is the string of raw as an interface value, shared with the last
// equal string its slot held.
func (t *stringTable) get(raw []byte) interface{} {
	slot := t.slot(raw)
	if v := slot.Load(); v != nil && v.(string) == string(raw) {
		return v
	}
	var v interface{} = string(raw)
	slot.Store(v)
	return v
}

func (t *stringTable) slot(raw []byte) *atomic.Value {
	return &t.slots[maphash.Bytes(t.seed, raw)&(uint64(len(t.slots))-1)]
}

// sharedKey tells the keys whose object or array values are shared: in
// metadata, the labels, the owner references and the managedFields list
// (also wherever else such a key appears, a pod template's labels among
// them: all are read only). The children one sync applies have the same
// managedFields, the loop's entry with the second it applied them, unless
// that second ended between two of them: then each list is decoded, and
// its entries' fields (fieldsV1) are still shared.
func sharedKey(key string) bool {
	switch key {
	case "labels", "ownerReferences", "managedFields", "fieldsV1":
		return true
	}
	return false
}

// maxSharedDepth is the deepest object whose members may be shared: a
// pod template's labels and a managedFields entry's fieldsV1 are members of
// objects at depth 4. Deeper, a value is decoded as any other: sharing
// skims ahead up to maxShared bytes at each such key, and a custom
// resource nested as {"labels":{"labels":…}} would be skimmed again at
// every level, about 80 MB per watch event at 10,000 levels (R20a of the
// December review), against one linear pass.
const maxSharedDepth = 4

// sharedComposite decodes the object or array at d.pos, or takes it from
// sharedValues when its bytes are those of one decoded before: JSON is
// read to the end of a value without looking past it, so the same bytes
// decode to the same value wherever they are, and bytes that decoded once
// are JSON. Its nesting still counts against maxDepth.
func (d *decoder) sharedComposite(depth int) (interface{}, error) {
	start := d.pos
	if end, nest, ok := skipComposite(d.data[:min(len(d.data), start+maxShared)], start); ok && depth+nest <= maxDepth {
		if v, ok := sharedValues.get(d.data[start:end]); ok {
			d.pos = end
			return v, nil
		}
	}
	v, err := d.value(depth)
	if err != nil {
		return nil, err
	}
	sharedValues.put(d.data[start:d.pos], v)
	return v, nil
}

// skipComposite finds the end of the object or array that starts at i and
// how deeply it nests, reading only brackets and where strings end (and
// only as far as data goes: sharedComposite gives it maxShared bytes, so
// that a value too long to share is not read twice). Its answer is only as
// good as the JSON it is given: a span it finds is used only when it
// equals one that decoded.
func skipComposite(data []byte, i int) (end, nest int, ok bool) {
	level := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if level++; level > nest {
				nest = level
			}
		case '}', ']':
			if level--; level == 0 {
				return i + 1, nest, true
			}
		}
	}
	return 0, 0, false
}

// maxShared is the longest value shared: a ConfigMap's fieldsV1 is about
// 200 bytes, a Pod's a few thousand; longer ones seldom repeat, and the
// table keeps a copy of the bytes of each it holds.
const maxShared = 8 << 10

// sharedValues are the values of sharedKey's keys decoded recently.
var sharedValues = newSubtreeTable()

// subtreeTable is, as stringTable, a fixed number of slots, each holding
// the last value whose bytes' hash chose it, with those bytes: at most
// 1,024 copies of at most maxShared bytes, and the values themselves,
// which the cache holds anyway while an object holding them lives.
type subtreeTable struct {
	seed  maphash.Seed
	slots [1 << 10]atomic.Pointer[subtree]
}

type subtree struct {
	raw   string
	value interface{}
}

func newSubtreeTable() *subtreeTable {
	return &subtreeTable{seed: maphash.MakeSeed()}
}

func (t *subtreeTable) slot(raw []byte) *atomic.Pointer[subtree] {
	return &t.slots[maphash.Bytes(t.seed, raw)&(uint64(len(t.slots))-1)]
}

// get is the value last decoded from raw, if its slot still holds it.
func (t *subtreeTable) get(raw []byte) (interface{}, bool) {
	if len(raw) > maxShared {
		return nil, false
	}
	if s := t.slot(raw).Load(); s != nil && s.raw == string(raw) {
		return s.value, true
	}
	return nil, false
}

// put keeps value as the value decoded from raw.
func (t *subtreeTable) put(raw []byte, value interface{}) {
	if len(raw) <= maxShared {
		t.slot(raw).Store(&subtree{raw: string(raw), value: value})
	}
}
