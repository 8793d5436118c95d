package hookapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/unstructuredjson"
)

// MarshalJSON writes what encoding/json writes for the request's fields,
// the observed children taken from r.Encodings when set. It writes every
// field into one buffer: through json.Marshal of the fields, the bytes of
// each Marshaler among them (the objects, the maps of objects) would be
// scanned and copied once more.
func (r SyncHookRequest) MarshalJSON() ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, r.Encodings.sizeHint()))
	enc := json.NewEncoder(buf)
	buf.WriteString(`{"controller":`)
	if err := r.Encodings.writeController(buf, enc, r.Controller); err != nil {
		return nil, err
	}
	buf.WriteString(`,"parent":`)
	if err := encodeObject(buf, enc, unstructuredContent(r.Parent)); err != nil {
		return nil, err
	}
	buf.WriteString(`,"children":`)
	if err := r.Children.writeJSON(buf, enc, r.Encodings); err != nil {
		return nil, err
	}
	buf.WriteString(`,"related":`)
	if err := r.Related.writeJSON(buf, enc, nil); err != nil {
		return nil, err
	}
	fmt.Fprintf(buf, `,"finalizing":%t}`, r.Finalizing)
	r.Encodings.sent(buf.Len())
	return buf.Bytes(), nil
}

// unstructuredContent is what encoding/json encodes for obj through its
// MarshalJSON: its content, or null.
func unstructuredContent(obj *unstructured.Unstructured) any {
	if obj == nil {
		return nil
	}
	return obj.Object
}

// EncodingCache keeps, for each parent of a loop, the JSON encoding of
// the observed children its last sync request sent, by UID and
// resourceVersion: a child that did not change since is not encoded
// again. An object of the API server does not change without a new
// resourceVersion, and the loop's informers transform every version of
// an object alike, so the same UID and resourceVersion mean the same
// bytes.
//
// Its memory is bounded by the children of the parents it holds: each
// sync of a parent replaces the parent's entries with those its request
// used (a deleted child drops out at its parent's next sync), and Forget
// drops a parent, which the loop does when it is gone and when its sync
// wrote nothing (converged: no echo will call the hook again soon), so
// that only the parents converging hold encodings. The zero value is
// ready to use; it is safe for concurrent use by syncs of different
// parents.
//
// It also keeps the encoding of the controller object the loop's requests
// send, which encoding/json would otherwise write through reflection for
// every sync (a quarter of what writing a B2 request cost,
// BenchmarkSyncHookRequestMarshalJSON): every request of a loop sends the
// same object, its compiled definition's, until the controller changes.
type EncodingCache struct {
	mu      sync.Mutex
	parents map[string]*Encodings
	// controller is the object controllerJSON encodes, at the
	// resourceVersion it had when encoded.
	controller     *v1alpha1.CompositeController
	controllerRV   string
	controllerJSON []byte
}

// Parent returns the encodings for one sync of the parent of key, to set
// as a SyncHookRequest's Encodings: they start from what the parent's
// previous sync encoded, and keep only what this sync encodes.
func (c *EncodingCache) Parent(key string) *Encodings {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parents == nil {
		c.parents = map[string]*Encodings{}
	}
	e := &Encodings{cache: c}
	if prev := c.parents[key]; prev != nil {
		prev.mu.Lock()
		e.last, e.lastSize = prev.used, prev.size
		prev.mu.Unlock()
	}
	c.parents[key] = e
	return e
}

// Forget drops the encodings of the parent of key, once it is gone.
func (c *EncodingCache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parents, key)
}

// Encodings are the children's encodings of one sync of one parent
// (EncodingCache.Parent). Hook requests of the same sync share them: a
// rolling update calls the hook once per revision with the same
// children.
type Encodings struct {
	// cache is the loop's, which keeps the controller's encoding.
	cache *EncodingCache
	mu    sync.Mutex
	// last are the previous sync's encodings, used are this one's.
	last, used map[types.UID]encoded
	// lastSize and size are the lengths of the previous sync's request and
	// of this one's: the buffer of the next request starts at about that
	// size, rather than growing to it by doubling, copying what it holds
	// each time (a B2 request grew from 4 KiB to 16 KiB, allocating 28 KiB
	// for 12 KiB).
	lastSize, size int
	// Encoded counts the objects encoded, Reused those taken from the
	// cache, for tests and benchmarks.
	Encoded, Reused int
}

type encoded struct {
	resourceVersion string
	json            []byte
}

// write writes obj's JSON, as enc encodes obj.Object, to buf: from the
// cache when the object's UID and resourceVersion were encoded before.
// An object without both is encoded every time.
func (e *Encodings) write(buf *bytes.Buffer, enc *json.Encoder, obj *unstructured.Unstructured) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	e.mu.Lock()
	defer e.mu.Unlock()
	if uid == "" || rv == "" {
		e.Encoded++
		return encodeObject(buf, enc, obj.Object)
	}
	if c, ok := e.used[uid]; ok && c.resourceVersion == rv {
		e.Reused++
		buf.Write(c.json)
		return nil
	}
	if c, ok := e.last[uid]; ok && c.resourceVersion == rv {
		e.remember(uid, c)
		e.Reused++
		buf.Write(c.json)
		return nil
	}
	start := buf.Len()
	if err := encodeObject(buf, enc, obj.Object); err != nil {
		return err
	}
	e.Encoded++
	// A copy: buf's bytes are the request's, sent and then dropped.
	e.remember(uid, encoded{resourceVersion: rv, json: bytes.Clone(buf.Bytes()[start:])})
	return nil
}

// writeController writes the controller object's JSON, as enc encodes it,
// to buf: from the loop's cache when it holds this object (the same
// pointer, never changed in place as no object of an informer is, at the
// same resourceVersion).
func (e *Encodings) writeController(buf *bytes.Buffer, enc *json.Encoder, cc *v1alpha1.CompositeController) error {
	if e == nil || e.cache == nil || cc == nil {
		return encodeObject(buf, enc, cc)
	}
	c := e.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.controller == cc && c.controllerRV == cc.ResourceVersion {
		buf.Write(c.controllerJSON)
		return nil
	}
	start := buf.Len()
	if err := encodeObject(buf, enc, cc); err != nil {
		return err
	}
	c.controller, c.controllerRV = cc, cc.ResourceVersion
	c.controllerJSON = bytes.Clone(buf.Bytes()[start:])
	return nil
}

// sizeHint is the capacity to start a request's buffer with: a little more
// than the parent's previous request, or 4 KiB.
func (e *Encodings) sizeHint() int {
	if e == nil {
		return 4096
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lastSize == 0 {
		return 4096
	}
	return e.lastSize + e.lastSize/8
}

// sent records the length of a request written with e.
func (e *Encodings) sent(n int) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.size = n
	e.mu.Unlock()
}

func (e *Encodings) remember(uid types.UID, c encoded) {
	if e.used == nil {
		e.used = map[types.UID]encoded{}
	}
	e.used[uid] = c
}

// encodeObject writes v's JSON to buf, without the newline Encode ends a
// value with: an object's content by unstructuredjson, anything else (the
// CompositeController) through enc, which writes into buf.
func encodeObject(buf *bytes.Buffer, enc *json.Encoder, v any) error {
	if m, ok := v.(map[string]interface{}); ok {
		data, err := unstructuredjson.Append(buf.AvailableBuffer(), m)
		if err != nil {
			return err
		}
		buf.Write(data)
		return nil
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1)
	return nil
}

// DeepCopy copies the request and every object in it; Encodings, not
// objects of the request, are shared.
func (r *SyncHookRequest) DeepCopy() *SyncHookRequest {
	if r == nil {
		return nil
	}
	out := *r
	out.Controller = r.Controller.DeepCopy()
	out.Parent = r.Parent.DeepCopy()
	out.Children = r.Children.DeepCopy()
	out.Related = r.Related.DeepCopy()
	return &out
}

// DeepCopy copies the request and every object in it.
func (r *DecoratorHookRequest) DeepCopy() *DecoratorHookRequest {
	if r == nil {
		return nil
	}
	out := *r
	out.Controller = r.Controller.DeepCopy()
	out.Object = r.Object.DeepCopy()
	out.Attachments = r.Attachments.DeepCopy()
	out.Related = r.Related.DeepCopy()
	return &out
}

// DeepCopy copies the map and every object in it; nil stays nil, and so
// does a nil group.
func (m RelativeObjectMap) DeepCopy() RelativeObjectMap {
	if m == nil {
		return nil
	}
	out := make(RelativeObjectMap, len(m))
	for g, objs := range m {
		if objs == nil {
			out[g] = nil
			continue
		}
		copied := make(map[string]*unstructured.Unstructured, len(objs))
		for k, obj := range objs {
			copied[k] = obj.DeepCopy()
		}
		out[g] = copied
	}
	return out
}
