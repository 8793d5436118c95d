package compositecontroller

import (
	"context"
	"fmt"
	"strings"

	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/registry/controllerregistry"
)

// tableColumns are what `kubectl get compositecontrollers` prints; columns
// with priority 1 appear only with -o wide.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: controllerregistry.ObjectMetaDescriptions["name"]},
	{Name: "Parent", Type: "string", Description: "The parent resource, as apiVersion/resource."},
	{Name: "Children", Type: "string", Description: "The child resources, by resource name."},
	{Name: "Sync Hook", Type: "string", Description: "Where the sync hook is called."},
	{Name: "Ready", Type: "string", Description: "The Ready condition: whether the controller's loop runs."},
	{Name: "Parents", Type: "integer", Description: "How many parents the controller handles."},
	{Name: "Age", Type: "string", Description: controllerregistry.ObjectMetaDescriptions["creationTimestamp"]},
	{Name: "Customize Hook", Type: "string", Priority: 1, Description: "Where the customize hook is called."},
	{Name: "Finalize Hook", Type: "string", Priority: 1, Description: "Where the finalize hook is called."},
	{Name: "Last Sync", Type: "string", Priority: 1, Description: "How long ago a parent was last synced."},
	{Name: "Message", Type: "string", Priority: 1, Description: "The last sync error, if any."},
}

// tableConvertor prints CompositeControllers for kubectl.
type tableConvertor struct{}

// ConvertToTable implements rest.TableConvertor.
func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := controllerregistry.NewTable(obj, tableColumns)
	var err error
	table.Rows, err = metatable.MetaToTableRow(obj, func(obj runtime.Object, m metav1.Object, name, age string) ([]interface{}, error) {
		cc, ok := obj.(*metacontroller.CompositeController)
		if !ok {
			return nil, fmt.Errorf("not a CompositeController: %T", obj)
		}
		return []interface{}{
			name,
			controllerregistry.ResourceString(cc.Spec.ParentResource.ResourceRule),
			childrenString(cc.Spec.ChildResources),
			controllerregistry.HookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Sync })),
			controllerregistry.ReadyString(cc.Status.Conditions),
			int64(cc.Status.Parents),
			age,
			controllerregistry.HookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Customize })),
			controllerregistry.HookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Finalize })),
			controllerregistry.SinceString(cc.Status.LastSyncTime),
			cc.Status.LastSyncError,
		}, nil
	})
	return table, err
}

func childrenString(children []metacontroller.CompositeControllerChildResourceRule) string {
	if len(children) == 0 {
		return "<none>"
	}
	names := make([]string, 0, len(children))
	for _, c := range children {
		names = append(names, c.Resource)
	}
	return strings.Join(names, ",")
}

func hook(cc *metacontroller.CompositeController, pick func(*metacontroller.CompositeControllerHooks) *metacontroller.Hook) *metacontroller.Hook {
	if cc.Spec.Hooks == nil {
		return nil
	}
	return pick(cc.Spec.Hooks)
}
