package rollout

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func parents(n int) []metav1.Object {
	var out []metav1.Object
	for i := 0; i < n; i++ {
		u := &unstructured.Unstructured{}
		u.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		u.SetName(fmt.Sprintf("p-%d", i))
		if i%10 == 0 {
			u.SetLabels(map[string]string{"canary": "true"})
		}
		out = append(out, u)
	}
	return out
}

func updated(p *Plan, ps []metav1.Object) int {
	n := 0
	for _, o := range ps {
		if p.Updated(o) {
			n++
		}
	}
	return n
}

// TestPlanMovesParentsStepByStep walks a rollout's steps over 1,000
// parents: a selector moves exactly its parents, maxParents that many more
// (a few more when parents share a bucket), a percent about its share, and
// a later step never moves a parent back.
func TestPlanMovesParentsStepByStep(t *testing.T) {
	ps := parents(1000)
	steps := []v1alpha1.RolloutStep{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}},
		{MaxParents: ptr.To[int32](50)},
		{Percent: ptr.To[int32](50)},
		{Percent: ptr.To[int32](100)},
	}
	st := &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing}
	var before map[string]bool
	want := []func(int) bool{
		func(n int) bool { return n == 100 },
		func(n int) bool { return n >= 145 && n <= 155 },
		func(n int) bool { return n >= 520 && n <= 580 },
		func(n int) bool { return n == 1000 },
	}
	for i, step := range steps {
		st.Step = int32(i)
		var waiting []metav1.Object
		for _, o := range ps {
			if !before[o.GetName()] {
				waiting = append(waiting, o)
			}
		}
		st.BucketLimit = LimitOf(step, st.BucketLimit, waiting)
		began := metav1.Now()
		st.StepStartTime = &began
		p, err := NewPlan(steps, st)
		if err != nil {
			t.Fatal(err)
		}
		n := updated(p, ps)
		if !want[i](n) {
			t.Errorf("step %d moved %d parents", i, n)
		}
		now := map[string]bool{}
		for _, o := range ps {
			now[o.GetName()] = p.Updated(o)
			if before[o.GetName()] && !now[o.GetName()] {
				t.Errorf("step %d moved %s back", i, o.GetName())
			}
		}
		before = now
	}
}

func TestPlanOfEndedRollouts(t *testing.T) {
	ps := parents(100)
	steps := []v1alpha1.RolloutStep{{Percent: ptr.To[int32](10)}}
	for _, tc := range []struct {
		status *v1alpha1.RolloutStatus
		want   int
	}{
		{nil, 100},
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutComplete}, 100},
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutRolledBack, BucketLimit: Buckets}, 0},
		// A step index past the steps (steps cut mid-rollout) holds at
		// the last step's plan: it never moves every parent (R2).
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutPaused, Step: 1}, 0},
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutPaused, Step: 1, BucketLimit: 1000}, 10},
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing}, 0},
	} {
		p, err := NewPlan(steps, tc.status)
		if err != nil {
			t.Fatal(err)
		}
		if n := updated(p, ps); n != tc.want {
			t.Errorf("status %+v: %d parents updated, want %d", tc.status, n, tc.want)
		}
	}
}

func TestHealth(t *testing.T) {
	ready := &unstructured.Unstructured{Object: map[string]interface{}{"status": map[string]interface{}{
		"conditions": []interface{}{map[string]interface{}{"type": "Ready", "status": "False"}}, "replicas": int64(3)}}}
	if ok, has := DefaultHealthy(ready); ok || !has {
		t.Errorf("DefaultHealthy of Ready=False: %v, %v", ok, has)
	}
	if ok, has := DefaultHealthy(&unstructured.Unstructured{Object: map[string]interface{}{}}); !ok || has {
		t.Errorf("DefaultHealthy without conditions: %v, %v", ok, has)
	}
	h, err := CompileHealth("parent.status.replicas >= 3")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.Healthy(t.Context(), ready); !ok || err != nil {
		t.Errorf("replicas >= 3: %v, %v", ok, err)
	}
	for _, bad := range []string{"parent.status.", "1 + 1", "nosuch.field"} {
		if err := CheckHealth(bad); err == nil {
			t.Errorf("CheckHealth(%q) accepted it", bad)
		}
	}
}

// TestPlanMovesNoParentOfAStepNotBegun: between a step that passed and the
// next (its pause), the next step's selector moves none of its parents,
// on a replica that reads the status as well as on the driver.
func TestPlanMovesNoParentOfAStepNotBegun(t *testing.T) {
	ps := parents(100)
	steps := []v1alpha1.RolloutStep{
		{Percent: ptr.To[int32](0)},
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}},
	}
	began := metav1.Now()
	for _, tc := range []struct {
		status *v1alpha1.RolloutStatus
		want   int
	}{
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing, Step: 1}, 0},
		{&v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing, Step: 1, StepStartTime: &began}, 10},
	} {
		p, err := NewPlan(steps, tc.status)
		if err != nil {
			t.Fatal(err)
		}
		if n := updated(p, ps); n != tc.want {
			t.Errorf("step %d begun %v: %d parents updated, want %d", tc.status.Step, tc.status.StepStartTime != nil, n, tc.want)
		}
	}
}
