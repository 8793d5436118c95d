package plugin

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	ccclient "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/typed/metacontroller/v1alpha1"
)

// controllerArg is a command's CONTROLLER: NAME for a CompositeController;
// TYPE/NAME, kubectl's way, for either kind, TYPE being a DecoratorController's
// decoratorcontroller, decoratorcontrollers, dec or decorators (or a
// CompositeController's cc, cctl, compositecontroller, compositecontrollers).
type controllerArg struct {
	kind string
	name string
}

func parseControllerArg(arg string) (controllerArg, error) {
	typ, name, found := strings.Cut(arg, "/")
	if !found {
		return controllerArg{kind: definition.KindComposite, name: arg}, nil
	}
	switch strings.ToLower(strings.TrimSuffix(typ, ".metacontroller.k8s.io")) {
	case "cc", "cctl", "compositecontroller", "compositecontrollers":
		return controllerArg{kind: definition.KindComposite, name: name}, nil
	case "dec", "decorators", "decoratorcontroller", "decoratorcontrollers":
		return controllerArg{kind: definition.KindDecorator, name: name}, nil
	}
	return controllerArg{}, fmt.Errorf("%q is no kind of controller: CONTROLLER is NAME, compositecontroller/NAME or decoratorcontroller/NAME", typ)
}

func (c controllerArg) String() string { return fmt.Sprintf("%s %q", c.kind, c.name) }

// sync POSTs req to the controller's /sync.
func (c controllerArg) sync(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface, req *v1alpha1.SyncRequest, opts metav1.CreateOptions) (*v1alpha1.SyncRequest, error) {
	if c.kind == definition.KindDecorator {
		return client.DecoratorControllers().Sync(ctx, c.name, req, opts)
	}
	return client.CompositeControllers().Sync(ctx, c.name, req, opts)
}

// definition reads the controller and compiles it as written, without
// discovery.
func (c controllerArg) definition(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface) (*definition.Definition, error) {
	var controller runtime.Object
	var err error
	if c.kind == definition.KindDecorator {
		controller, err = client.DecoratorControllers().Get(ctx, c.name, metav1.GetOptions{})
	} else {
		controller, err = client.CompositeControllers().Get(ctx, c.name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("can't read %s: %w", c, err)
	}
	def, err := definition.Compile(controller, nil)
	if err != nil {
		return nil, fmt.Errorf("can't read %s: %w", c, err)
	}
	return def, nil
}

// preview POSTs req to the controller's /preview.
func (c controllerArg) preview(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface, req *v1alpha1.FleetPreview, opts metav1.CreateOptions) (*v1alpha1.FleetPreview, error) {
	if c.kind == definition.KindDecorator {
		return client.DecoratorControllers().Preview(ctx, c.name, req, opts)
	}
	return client.CompositeControllers().Preview(ctx, c.name, req, opts)
}
