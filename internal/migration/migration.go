// Package migration notices what Metacontroller leaves in a cluster that
// takes metacontroller.k8s.io/v1alpha1 from this server: its
// CustomResourceDefinitions of the group, and the APIService kube-apiserver
// then manages for them (kube-aggregator's automanaged one, served by
// kube-apiserver itself), which replaces this server's. It says what to
// delete, in the server's log and in a Warning Event on each such object.
package migration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

var (
	crds        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// MetacontrollerCRDs are the CustomResourceDefinitions Metacontroller
// installs for the group this server serves.
var MetacontrollerCRDs = []string{
	"compositecontrollers.metacontroller.k8s.io",
	"decoratorcontrollers.metacontroller.k8s.io",
	"controllerrevisions.metacontroller.k8s.io",
}

// APIService is the APIService of the group-version, this server's when it
// names a service.
const APIService = "v1alpha1.metacontroller.k8s.io"

// Reason is the reason of the Events.
const Reason = "MetacontrollerLeftover"

// Finding is one leftover and what to do about it.
type Finding struct {
	Object  *unstructured.Unstructured
	Message string
}

// Find reads the target cluster for Metacontroller's leftovers. An object
// the server may not read is not reported: the check is advice, not a
// condition of running.
func Find(ctx context.Context, client dynamic.Interface) ([]Finding, error) {
	var out []Finding
	for _, name := range MetacontrollerCRDs {
		crd, err := get(ctx, client, crds, name)
		if err != nil {
			return out, err
		}
		if crd != nil {
			out = append(out, Finding{Object: crd, Message: fmt.Sprintf(
				"Metacontroller's CustomResourceDefinition %s is installed: while it is, kube-apiserver serves metacontroller.k8s.io/v1alpha1 from it and not from composite-apiserver; stop Metacontroller, then `kubectl delete crd %s` (composite-apiserver serves its objects)",
				name, name)})
		}
	}
	svc, err := get(ctx, client, apiServices, APIService)
	if err != nil || svc == nil {
		return out, err
	}
	if _, found, _ := unstructured.NestedMap(svc.Object, "spec", "service"); !found {
		out = append(out, Finding{Object: svc, Message: fmt.Sprintf(
			"APIService %s has no service: kube-apiserver serves metacontroller.k8s.io/v1alpha1 itself (from Metacontroller's CustomResourceDefinitions), so requests never reach composite-apiserver; delete those CRDs and composite-apiserver registers its own once ready (--register-apiservice)",
			APIService)})
	}
	return out, nil
}

func get(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	obj, err := client.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("can't read %s %s: %w", gvr.Resource, name, err)
	}
	return obj, nil
}

// Notice says each finding in the log and, when recorder is set, in a
// Warning Event on the object concerned.
func Notice(ctx context.Context, findings []Finding, recorder record.EventRecorder) {
	logger := klog.FromContext(ctx)
	for _, f := range findings {
		logger.Info("Metacontroller leftover takes the group from this server", "kind", f.Object.GetKind(), "name", f.Object.GetName(), "fix", f.Message)
		if recorder != nil {
			recorder.Event(f.Object, corev1.EventTypeWarning, Reason, f.Message)
		}
	}
}
