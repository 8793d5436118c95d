package fieldowner

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

type countingComparer struct {
	calls   int
	changed bool
}

func (c *countingComparer) Compare(observed, desired *unstructured.Unstructured, manager string) (Result, error) {
	c.calls++
	return Result{Changed: c.changed, Lines: []string{"x"}}, nil
}

func (c *countingComparer) CompareDryRun(observed, desired, stored *unstructured.Unstructured, manager string) (Result, error) {
	c.calls++
	if c.changed {
		return Result{Changed: true, Lines: []string{"server"}}, nil
	}
	return Result{}, nil
}

func (c *countingComparer) TakeoverPatch(*unstructured.Unstructured, string) ([]byte, bool, error) {
	return nil, false, nil
}

func TestUnchanged(t *testing.T) {
	obj := func(uid, rv, color string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]interface{}{"data": map[string]interface{}{"color": color}}}
		if uid != "" {
			o.SetUID(types.UID("u-" + uid))
		}
		o.SetResourceVersion(rv)
		return o
	}
	inner := &countingComparer{}
	u := NewUnchanged(inner, 10)
	compare := func(observed, desired *unstructured.Unstructured, manager string) Result {
		t.Helper()
		res, err := u.Compare(observed, desired, manager)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	compare(obj("a", "1", "blue"), obj("", "", "blue"), "m")
	if res := compare(obj("a", "1", "blue"), obj("", "", "blue"), "m"); inner.calls != 1 || res.Changed {
		t.Errorf("the same child and desired object merged again: %d calls", inner.calls)
	}
	for _, tc := range []struct {
		name              string
		observed, desired *unstructured.Unstructured
		manager           string
	}{
		{"another resourceVersion", obj("a", "2", "blue"), obj("", "", "blue"), "m"},
		{"another desired object", obj("a", "1", "blue"), obj("", "", "red"), "m"},
		{"another manager", obj("a", "1", "blue"), obj("", "", "blue"), "n"},
		{"another child", obj("b", "1", "blue"), obj("", "", "blue"), "m"},
	} {
		before := inner.calls
		compare(tc.observed, tc.desired, tc.manager)
		if inner.calls != before+1 {
			t.Errorf("%s: answered from memory", tc.name)
		}
	}

	// A changed answer is never remembered.
	inner.changed = true
	compare(obj("c", "1", "blue"), obj("", "", "red"), "m")
	if res := compare(obj("c", "1", "blue"), obj("", "", "red"), "m"); !res.Changed || inner.calls != 7 {
		t.Errorf("a change was remembered as none: %+v, %d calls", res, inner.calls)
	}

	// What was applied and stored needs no merge on the next sync.
	u.Applied(jsonOf(t, obj("", "", "red")), "u-c", "5", "m")
	if res := compare(obj("c", "5", "red"), obj("", "", "red"), "m"); res.Changed || inner.calls != 7 {
		t.Errorf("the applied child was merged again: %+v, %d calls", res, inner.calls)
	}
}

// TestServerAnswersAreTrustedForALimitedTime: what the API server answered
// (a dry run, changed or not, and what an apply stored) depends on the
// admission chain and defaulting, which the key does not hold: it is
// trusted for serverAnswerTTL, so that a mutating policy's removal shows
// within a bounded time. A local merge's answer depends on the key alone
// and is kept.
func TestServerAnswersAreTrustedForALimitedTime(t *testing.T) {
	child := func() *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]interface{}{"data": map[string]interface{}{"color": "red"}}}
		o.SetUID("u-a")
		o.SetResourceVersion("5")
		return o
	}
	desired := &unstructured.Unstructured{Object: map[string]interface{}{"data": map[string]interface{}{"color": "blue"}}}
	changed := Result{Changed: true, Lines: []string{"server"}}
	for _, tc := range []struct {
		name string
		// answer is how the answer came to be remembered.
		answer  func(u *Unchanged, inner *countingComparer)
		expires bool
		// dryRun is what DryRunAnswer knows; nil for nothing.
		dryRun *Result
	}{
		{name: "a dry run found it converged", answer: func(u *Unchanged, inner *countingComparer) {
			_, _ = u.CompareDryRun(child(), desired, child(), "m")
		}, expires: true, dryRun: &Result{}},
		{name: "a dry run found it changed", answer: func(u *Unchanged, inner *countingComparer) {
			inner.changed = true
			_, _ = u.CompareDryRun(child(), desired, child(), "m")
		}, expires: true, dryRun: &changed},
		{name: "the server stored the apply", answer: func(u *Unchanged, inner *countingComparer) {
			u.Applied(jsonOf(t, desired), "u-a", "5", "m")
		}, expires: true, dryRun: &Result{}},
		{name: "the local merge found it converged", answer: func(u *Unchanged, inner *countingComparer) {
			_, _ = u.Compare(child(), desired, "m")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			inner := &countingComparer{}
			u := NewUnchanged(inner, 10)
			u.now = func() time.Time { return now }
			tc.answer(u, inner)
			late := serverAnswerTTL
			if !tc.expires {
				late = 100 * serverAnswerTTL
			}
			for _, at := range []struct {
				after   time.Duration
				trusted bool
			}{{serverAnswerTTL - time.Second, true}, {late, !tc.expires}} {
				now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(at.after)
				res, known := u.DryRunAnswer(child(), desired, "m")
				wantKnown := at.trusted && tc.dryRun != nil
				if known != wantKnown || known && !reflect.DeepEqual(res, *tc.dryRun) {
					t.Errorf("after %v: dry run answer %+v known %v, want known %v", at.after, res, known, wantKnown)
				}
				if tc.dryRun != nil && tc.dryRun.Changed {
					continue
				}
				before := inner.calls
				_, _ = u.Compare(child(), desired, "m")
				if merged := inner.calls > before; merged == at.trusted {
					t.Errorf("after %v: merged %v, want the remembered answer trusted %v", at.after, merged, at.trusted)
				}
			}
		})
	}
}

// Past its size it starts over: memory stays bounded, answers stay right.
func TestUnchangedIsBounded(t *testing.T) {
	inner := &countingComparer{}
	u := NewUnchanged(inner, 2)
	for _, uid := range []string{"a", "b", "c"} {
		o := &unstructured.Unstructured{Object: map[string]interface{}{}}
		o.SetUID(types.UID(uid))
		o.SetResourceVersion("1")
		u.Applied(jsonOf(t, o), o.GetUID(), o.GetResourceVersion(), "m")
	}
	if len(u.byUID) != 1 {
		t.Errorf("%d entries, want 1 after starting over", len(u.byUID))
	}
}

// jsonOf is obj as the loop's applies send it.
func jsonOf(t *testing.T, obj *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// BenchmarkUnchangedCompare is the comparison of a converged child, which
// every sync of a parent makes for each of its children: a digest of the
// desired child and a lookup, no merge.
func BenchmarkUnchangedCompare(b *testing.B) {
	desired := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{
			"name": "p1-3", "namespace": "bench-0",
			"labels": map[string]interface{}{"controller-uid": "6b2c3d4e-0000-4000-8000-000000000001"},
			"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Hello", "name": "p1",
				"uid": "6b2c3d4e-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}},
		},
		"data": map[string]interface{}{"index": "3", "parent": "p1"},
	}}
	observed := desired.DeepCopy()
	observed.SetUID("7c2c3d4e-0000-4000-8000-000000000003")
	observed.SetResourceVersion("12343")
	inner := &countingComparer{}
	u := NewUnchanged(inner, 10)
	if _, err := u.Compare(observed, desired, "metacontroller.k8s.io/bench"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := u.Compare(observed, desired, "metacontroller.k8s.io/bench"); err != nil || res.Changed {
			b.Fatal(res, err)
		}
	}
	if inner.calls != 1 {
		b.Fatalf("%d merges, want the first alone", inner.calls)
	}
}
