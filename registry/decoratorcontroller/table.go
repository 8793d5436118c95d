package decoratorcontroller

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

// tableColumns are what `kubectl get decoratorcontrollers` prints; columns
// with priority 1 appear only with -o wide.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: controllerregistry.ObjectMetaDescriptions["name"]},
	{Name: "Resources", Type: "string", Description: "The decorated resources, as apiVersion/resource."},
	{Name: "Attachments", Type: "string", Description: "The attachment resources, by resource name."},
	{Name: "Sync Hook", Type: "string", Description: "Where the sync hook is called."},
	{Name: "Ready", Type: "string", Description: "The Ready condition: whether the controller's loop runs."},
	{Name: "Objects", Type: "integer", Description: "How many objects the controller decorates."},
	{Name: "Age", Type: "string", Description: controllerregistry.ObjectMetaDescriptions["creationTimestamp"]},
	{Name: "Finalize Hook", Type: "string", Priority: 1, Description: "Where the finalize hook is called."},
	{Name: "Last Sync", Type: "string", Priority: 1, Description: "How long ago an object was last synced."},
	{Name: "Message", Type: "string", Priority: 1, Description: "The last sync error, if any."},
}

// tableConvertor prints DecoratorControllers for kubectl.
type tableConvertor struct{}

// ConvertToTable implements rest.TableConvertor.
func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := controllerregistry.NewTable(obj, tableColumns)
	var err error
	table.Rows, err = metatable.MetaToTableRow(obj, func(obj runtime.Object, m metav1.Object, name, age string) ([]interface{}, error) {
		dc, ok := obj.(*metacontroller.DecoratorController)
		if !ok {
			return nil, fmt.Errorf("not a DecoratorController: %T", obj)
		}
		var resources, attachments []string
		for _, r := range dc.Spec.Resources {
			resources = append(resources, controllerregistry.ResourceString(r.ResourceRule))
		}
		for _, a := range dc.Spec.Attachments {
			attachments = append(attachments, a.Resource)
		}
		var sync, finalize *metacontroller.Hook
		if h := dc.Spec.Hooks; h != nil {
			sync, finalize = h.Sync, h.Finalize
		}
		return []interface{}{
			name,
			list(resources),
			list(attachments),
			controllerregistry.HookString(sync),
			controllerregistry.ReadyString(dc.Status.Conditions),
			int64(dc.Status.Objects),
			age,
			controllerregistry.HookString(finalize),
			controllerregistry.SinceString(dc.Status.LastSyncTime),
			dc.Status.LastSyncError,
		}, nil
	})
	return table, err
}

func list(items []string) string {
	if len(items) == 0 {
		return "<none>"
	}
	return strings.Join(items, ",")
}
