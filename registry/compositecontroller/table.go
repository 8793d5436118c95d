package compositecontroller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

var objectMetaDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// tableColumns are what `kubectl get compositecontrollers` prints; columns
// with priority 1 appear only with -o wide.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: objectMetaDescriptions["name"]},
	{Name: "Parent", Type: "string", Description: "The parent resource, as apiVersion/resource."},
	{Name: "Children", Type: "string", Description: "The child resources, by resource name."},
	{Name: "Sync Hook", Type: "string", Description: "Where the sync hook is called."},
	{Name: "Ready", Type: "string", Description: "The Ready condition: whether the controller's loop runs."},
	{Name: "Parents", Type: "integer", Description: "How many parents the controller handles."},
	{Name: "Age", Type: "string", Description: objectMetaDescriptions["creationTimestamp"]},
	{Name: "Customize Hook", Type: "string", Priority: 1, Description: "Where the customize hook is called."},
	{Name: "Finalize Hook", Type: "string", Priority: 1, Description: "Where the finalize hook is called."},
	{Name: "Last Sync", Type: "string", Priority: 1, Description: "How long ago a parent was last synced."},
	{Name: "Message", Type: "string", Priority: 1, Description: "The last sync error, if any."},
}

// tableConvertor prints CompositeControllers for kubectl.
type tableConvertor struct{}

// ConvertToTable implements rest.TableConvertor.
func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: tableColumns}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	var err error
	table.Rows, err = metatable.MetaToTableRow(obj, func(obj runtime.Object, m metav1.Object, name, age string) ([]interface{}, error) {
		cc, ok := obj.(*metacontroller.CompositeController)
		if !ok {
			return nil, fmt.Errorf("not a CompositeController: %T", obj)
		}
		return []interface{}{
			name,
			resourceString(cc.Spec.ParentResource.ResourceRule),
			childrenString(cc.Spec.ChildResources),
			hookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Sync })),
			readyString(cc.Status.Conditions),
			int64(cc.Status.Parents),
			age,
			hookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Customize })),
			hookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Finalize })),
			sinceString(cc.Status.LastSyncTime),
			cc.Status.LastSyncError,
		}, nil
	})
	return table, err
}

func resourceString(r metacontroller.ResourceRule) string {
	return r.APIVersion + "/" + r.Resource
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

// hookString names where a hook is called: its url, or the service, port and
// path it resolves to.
func hookString(h *metacontroller.Hook) string {
	if h == nil || h.Webhook == nil {
		return "<none>"
	}
	w := h.Webhook
	if w.URL != nil {
		return *w.URL
	}
	if s := w.Service; s != nil {
		out := s.Namespace + "/" + s.Name
		if s.Port != nil {
			out += fmt.Sprintf(":%d", *s.Port)
		}
		if w.Path != nil {
			out += *w.Path
		}
		return out
	}
	return "<none>"
}

func readyString(conditions []metav1.Condition) string {
	if c := meta.FindStatusCondition(conditions, metacontroller.ConditionReady); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

func sinceString(t *metav1.Time) string {
	if t == nil {
		return "<never>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
