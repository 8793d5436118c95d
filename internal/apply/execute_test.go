package apply

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

var things = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}

func thing(uid, rv string, status map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]interface{}{"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": rv, "generation": int64(3)},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// TestParentStatusRetriesAStaleParent: the status write of a parent read
// before someone else changed it conflicts; the status is then written onto
// the parent as it is now (read again), not lost, unless the parent was
// recreated meanwhile.
func TestParentStatusRetriesAStaleParent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		storedUID  string
		wantWrite  bool
		wantStatus bool
	}{
		{"the same parent, changed since it was read", "uid-1", true, true},
		{"a parent recreated under the same name", "uid-2", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := thing(tc.storedUID, "7", map[string]interface{}{"other": "writer"})
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{things: "ThingList"}, stored)
			conflicts := 0
			client.PrependReactor("update", "things", func(a k8stesting.Action) (bool, runtime.Object, error) {
				u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
				if a.GetSubresource() == "status" && u.GetResourceVersion() != "7" {
					conflicts++
					return true, nil, apierrors.NewConflict(things.GroupResource(), "p", nil)
				}
				// Stored at a new resourceVersion, as by kube-apiserver
				// (the fake tracker keeps the one sent).
				u = u.DeepCopy()
				u.SetResourceVersion("8")
				if err := client.Tracker().Update(things, u, "ns"); err != nil {
					return true, nil, err
				}
				return true, u, nil
			})
			stale := thing("uid-1", "5", nil)
			written, err := ParentStatus(context.Background(), client, things, stale, map[string]interface{}{"color": "blue"})
			if conflicts != 1 {
				t.Fatalf("%d conflicts, want the stale write's one", conflicts)
			}
			if tc.wantWrite && (err != nil || written == nil) {
				t.Fatalf("ParentStatus = %v, %v; want the status written after reading the parent again", written, err)
			}
			if !tc.wantWrite && (err == nil || !apierrors.IsNotFound(err) || written != nil) {
				t.Fatalf("ParentStatus = %v, %v; want NotFound: the parent synced is gone", written, err)
			}
			got, err := client.Resource(things).Namespace("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			color, _, _ := unstructured.NestedString(got.Object, "status", "color")
			og, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
			if (color == "blue" && og == 3) != tc.wantStatus {
				t.Fatalf("stored status %v", got.Object["status"])
			}
		})
	}
}

// TestAStatusWriteThatStoresNothingIsNoWrite: kube-apiserver answers a
// write that changes no byte of the object (the CRD's schema pruned every
// field the hook set that differs) with the object as it was, at the same
// resourceVersion, and sends no watch event for it. Such a write is not
// reported as written: the loop would await its echo, which never comes.
func TestAStatusWriteThatStoresNothingIsNoWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		storedRV  string
		wantWrite bool
	}{
		{"a write the API server stored", "8", true},
		{"a write that stored nothing", "7", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := thing("uid-1", "7", map[string]interface{}{"ready": true})
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{things: "ThingList"}, stored)
			client.PrependReactor("update", "things", func(a k8stesting.Action) (bool, runtime.Object, error) {
				// The schema keeps status.ready only, as a structural
				// status schema without observedGeneration does.
				u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
				ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
				u.Object["status"] = map[string]interface{}{"ready": ready}
				u.SetResourceVersion(tc.storedRV)
				return true, u, nil
			})
			written, err := ParentStatus(context.Background(), client, things, stored.DeepCopy(), map[string]interface{}{"ready": true, "pruned": "yes"})
			if err != nil {
				t.Fatal(err)
			}
			if (written != nil) != tc.wantWrite {
				t.Fatalf("ParentStatus = %v; want written %v: a write is one that stored a new resourceVersion", written, tc.wantWrite)
			}
		})
	}
}
