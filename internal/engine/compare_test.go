package engine

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// dryRunAnswer is a DryRunner that answers what answer makes of the
// observed child, and counts its calls.
type dryRunAnswer struct {
	observed *unstructured.Unstructured
	answer   func(observed *unstructured.Unstructured) (*unstructured.Unstructured, error)
	calls    int
}

func (d *dryRunAnswer) DryRunApply(_ context.Context, _ schema.GroupVersionResource, _ *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	d.calls++
	return d.answer(d.observed.DeepCopy())
}

// TestTheServersDryRunDecidesWhatDiffers: a child the local merge finds
// changed (here a Secret, updateStrategy Recreate) is checked with the
// target cluster's dry run of its apply, whose answer decides: stored as
// it is (admission or defaulting undo the difference), it is left alone;
// stored otherwise, it is recreated, with the server's lines. A refused
// apply (Invalid) or a failed dry run keep the local verdict, the latter
// with a warning; a dry run of a newer object than the one read decides
// nothing. A converged child costs no dry run.
func TestTheServersDryRunDecidesWhatDiffers(t *testing.T) {
	child := func() *unstructured.Unstructured {
		o := owned(object("v1", "Secret", parentNS, "s", "data.k", "b2xk"))
		o.SetResourceVersion("5")
		return o
	}
	for _, tc := range []struct {
		name    string
		desired string
		answer  func(observed *unstructured.Unstructured) (*unstructured.Unstructured, error)
		want    string
		reason  string
		diff    []string
		warns   bool
		calls   int
	}{
		{"the server would store it as it is", "bmV3", func(o *unstructured.Unstructured) (*unstructured.Unstructured, error) { return o, nil },
			"Unchanged", "", nil, false, 1},
		{"the server would store the change", "bmV3", func(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return o, unstructured.SetNestedField(o.Object, "bmV3", "data", "k")
		}, "Recreate", "differs; updateStrategy Recreate deletes and recreates it", []string{`data.k: "b2xk" -> "bmV3"`}, false, 1},
		{"the server refuses the apply", "bmV3", func(*unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", field.ErrorList{field.Forbidden(field.NewPath("data"), "immutable")})
		}, "Recreate", "differs; updateStrategy Recreate deletes and recreates it", []string{`data.k: "b2xk" -> "bmV3"`}, false, 1},
		{"the dry run fails", "bmV3", func(*unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return nil, errors.New("connection refused")
		},
			"Recreate", "differs; updateStrategy Recreate deletes and recreates it", []string{`data.k: "b2xk" -> "bmV3"`}, true, 1},
		{"the server holds a newer object", "bmV3", func(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			o.SetResourceVersion("6")
			return o, nil
		}, "Unchanged", reasonMovedOn, nil, false, 1},
		{"converged", "b2xk", nil, "Unchanged", "", nil, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			observed := child()
			in := newInput(newController(), newParent(), Claimed{Owned: []*unstructured.Unstructured{observed}}, returning(object("v1", "Secret", parentNS, "s", "data.k", tc.desired)))
			dry := &dryRunAnswer{observed: observed, answer: tc.answer}
			in.DryRun = dry
			p, err := Compute(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			it := p.Items[0]
			if string(it.Action) != tc.want || it.Reason != tc.reason || !reflect.DeepEqual(it.Diff, tc.diff) {
				t.Errorf("got %s %q, diff %q; want %s %q, diff %q", it.Action, it.Reason, it.Diff, tc.want, tc.reason, tc.diff)
			}
			if warned := len(p.Warnings) > 0 && strings.Contains(p.Warnings[0], "connection refused"); warned != tc.warns {
				t.Errorf("warnings %q", p.Warnings)
			}
			if dry.calls != tc.calls {
				t.Errorf("%d dry runs, want %d", dry.calls, tc.calls)
			}
		})
	}
}
