package syncrequest

import (
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// parentView is the view of def (definition.Parents) whose resource the
// request's parent is of: def itself for a CompositeController or a
// DecoratorController of one resource; otherwise the one of the inline
// object's apiVersion and kind, or of spec.parentRef's.
func parentView(def *definition.Definition, req *v1alpha1.SyncRequest, resolver definition.KindResolver) (*definition.Definition, error) {
	views := def.Parents()
	if len(views) == 1 {
		return views[0], nil
	}
	var typ struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	switch {
	case req.Spec.Parent != nil:
		if err := json.Unmarshal(req.Spec.Parent.Raw, &typ); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.parent is not a Kubernetes object: %v", err))
		}
	case req.Spec.ParentRef != nil:
		typ.APIVersion, typ.Kind = req.Spec.ParentRef.APIVersion, req.Spec.ParentRef.Kind
	}
	var resources []string
	for _, v := range views {
		resources = append(resources, v.Parent.GVR.Resource+" ("+v.Parent.APIVersion()+")")
	}
	if typ.APIVersion == "" || typ.Kind == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s %q decorates %s: say which with the object's apiVersion and kind (spec.parentRef.apiVersion and .kind for a live one)",
			def.Kind, def.Name, strings.Join(resources, ", ")))
	}
	gvr, _, err := resolver.ResourceFor(schema.FromAPIVersionAndKind(typ.APIVersion, typ.Kind))
	if err == nil {
		for _, v := range views {
			if v.Parent.GVR == gvr {
				return v, nil
			}
		}
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("%s %q decorates %s, not %s of %s", def.Kind, def.Name, strings.Join(resources, ", "), typ.Kind, typ.APIVersion))
}
