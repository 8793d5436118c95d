package fieldowner

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// leanChild is one of B2's children as the loop's informer of ConfigMaps
// receives it: applied by its controller, and with another manager's
// entry when label is set.
func leanChild(b *testing.B, label bool) *unstructured.Unstructured {
	entries := `{"manager":"metacontroller.k8s.io/bench","operation":"Apply","apiVersion":"v1","time":"2026-12-02T16:00:00Z","fieldsType":"FieldsV1",
		"fieldsV1":{"f:data":{"f:index":{},"f:parent":{}},"f:metadata":{"f:labels":{"f:controller-uid":{}},
		"f:ownerReferences":{"k:{\"uid\":\"6b2c3d4e-0000-4000-8000-000000000001\"}":{}}}}}`
	if label {
		entries += `,{"manager":"kubectl-label","operation":"Update","apiVersion":"v1","time":"2026-12-02T16:01:00Z","fieldsType":"FieldsV1",
		"fieldsV1":{"f:metadata":{"f:labels":{"f:team":{}}}}}`
	}
	data := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p1-3","namespace":"bench-0","uid":"7c2c3d4e-0000-4000-8000-000000000002",
		"resourceVersion":"12345","creationTimestamp":"2026-12-02T16:00:00Z","labels":{"controller-uid":"6b2c3d4e-0000-4000-8000-000000000001"},
		"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Hello","name":"p1","uid":"6b2c3d4e-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}],
		"managedFields":[` + entries + `]},"data":{"index":"3","parent":"p1"}}`
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(data), &obj.Object); err != nil {
		b.Fatal(err)
	}
	return obj
}

// BenchmarkLean is the informers' transform (Lean) of a child the loop
// applied, which every watch event of a child runs: with only its
// controller's entry (nothing to drop), and with another manager's too.
func BenchmarkLean(b *testing.B) {
	for _, c := range []struct {
		name  string
		label bool
	}{{"ours-only", false}, {"another-manager", true}} {
		b.Run(c.name, func(b *testing.B) {
			stored := leanChild(b, c.label)
			objs := make([]*unstructured.Unstructured, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				if len(objs) == 0 {
					b.StopTimer()
					for range cap(objs) {
						objs = append(objs, stored.DeepCopy())
					}
					b.StartTimer()
				}
				Lean(objs[len(objs)-1])
				objs = objs[:len(objs)-1]
			}
		})
	}
}
