package definition

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// Compile compiles a controller of any kind (a *v1alpha1.CompositeController
// or a *v1alpha1.DecoratorController), resolving its resources with
// resolver (nil, or one that can't map resources to kinds, leaves kinds and
// scopes unknown). A controller that can't compile gives one error naming
// the field at fault; validation rejects such controllers, so it is seen
// only for one stored before a rule was added. A new kind of controller
// adds a case here and a file of its own, and nothing elsewhere.
func Compile(controller runtime.Object, resolver KindResolver) (*Definition, error) {
	switch c := controller.(type) {
	case *v1alpha1.CompositeController:
		return compileComposite(c, resolver)
	case *v1alpha1.DecoratorController:
		return compileDecorator(c, resolver)
	}
	return nil, fmt.Errorf("can't compile a %T: not a kind of controller", controller)
}

// AuthorOf is who last wrote controller's spec, as the server recorded it
// in its status; nil when unknown or when controller is no kind of
// controller. It is the Definition's Author, read without compiling.
func AuthorOf(controller runtime.Object) *v1alpha1.ControllerAuthor {
	if c, ok := controller.(v1alpha1.Controller); ok {
		return c.GetAuthor()
	}
	return nil
}

// ControllerResource is the resource of the kind of controller d was
// compiled from (compositecontrollers, decoratorcontrollers), as errors
// about the controller name it.
func (d *Definition) ControllerResource() schema.GroupResource {
	return v1alpha1.Resource(strings.ToLower(d.Kind) + "s")
}

// IsRolling tells whether m is a rolling update method.
func IsRolling(m v1alpha1.ChildUpdateMethod) bool {
	return m == v1alpha1.ChildUpdateRollingRecreate || m == v1alpha1.ChildUpdateRollingInPlace
}

func parseGVR(path *field.Path, rule v1alpha1.ResourceRule) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("%s: %w", path.Child("apiVersion"), err)
	}
	return gv.WithResource(rule.Resource), nil
}

// resolveHooks resolves the sync, finalize and customize hooks every kind
// of controller has.
func resolveHooks(path *field.Path, sync, finalize, customize *v1alpha1.Hook) (Hooks, error) {
	var out Hooks
	for _, h := range []struct {
		name string
		spec *v1alpha1.Hook
		out  **Hook
	}{
		{HookSync, sync, &out.Sync},
		{HookFinalize, finalize, &out.Finalize},
		{HookCustomize, customize, &out.Customize},
	} {
		if h.spec == nil {
			continue
		}
		hook, err := ResolveHook(h.name, h.spec.Version, h.spec.Webhook)
		if err != nil {
			return out, fmt.Errorf("%s: %w", path.Child(h.name), err)
		}
		*h.out = hook
	}
	return out, nil
}
