package migration

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"
)

func object(apiVersion, kind, name string, spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	u.SetName(name)
	return u
}

// Metacontroller's CRDs of the group, and an APIService kube-apiserver
// serves itself, are each named with what to delete, in a Warning Event
// on the object; this server's own APIService (with a service) is not.
func TestFindAndNotice(t *testing.T) {
	lists := map[schema.GroupVersionResource]string{crds: "CustomResourceDefinitionList", apiServices: "APIServiceList"}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		want    []string
	}{
		{"nothing left", []runtime.Object{
			object("apiregistration.k8s.io/v1", "APIService", APIService, map[string]interface{}{"service": map[string]interface{}{"name": "composite-apiserver"}}),
		}, nil},
		{"Metacontroller's CRD and the automanaged APIService", []runtime.Object{
			object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "decoratorcontrollers.metacontroller.k8s.io", nil),
			object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com", nil),
			object("apiregistration.k8s.io/v1", "APIService", APIService, map[string]interface{}{"group": "metacontroller.k8s.io"}),
		}, []string{"kubectl delete crd decoratorcontrollers.metacontroller.k8s.io", "APIService v1alpha1.metacontroller.k8s.io has no service"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, tc.objects...)
			findings, err := Find(context.Background(), client)
			if err != nil {
				t.Fatal(err)
			}
			recorder := record.NewFakeRecorder(10)
			Notice(context.Background(), findings, recorder)
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
			}
			if len(events) != len(tc.want) {
				t.Fatalf("events %q, want %d", events, len(tc.want))
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(events[i], "Warning "+Reason+" ") || !strings.Contains(events[i], want) {
					t.Errorf("event %q does not say %q", events[i], want)
				}
			}
		})
	}
}
