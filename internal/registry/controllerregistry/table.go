package controllerregistry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// ObjectMetaDescriptions describe the Name and Age columns.
var ObjectMetaDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// Columns both kinds print.
var (
	NameColumn         = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: ObjectMetaDescriptions["name"]}
	SyncHookColumn     = metav1.TableColumnDefinition{Name: "Sync Hook", Type: "string", Description: "Where the sync hook is called."}
	ReadyColumn        = metav1.TableColumnDefinition{Name: "Ready", Type: "string", Description: "The Ready condition: whether the controller's loop runs."}
	AgeColumn          = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: ObjectMetaDescriptions["creationTimestamp"]}
	FinalizeHookColumn = metav1.TableColumnDefinition{Name: "Finalize Hook", Type: "string", Priority: 1, Description: "Where the finalize hook is called."}
	RevisionColumn     = metav1.TableColumnDefinition{Name: "Revision", Type: "integer", Priority: 1, Description: "The spec's revision (status.revision)."}
	RolloutColumn      = metav1.TableColumnDefinition{Name: "Rollout", Type: "string", Priority: 1, Description: "Where the rollout of the spec is (spec.rollout): its phase and step."}
	MessageColumn      = metav1.TableColumnDefinition{Name: "Message", Type: "string", Priority: 1, Description: "The last sync error, if any."}
)

// TableConvertor prints controllers of the kind T for kubectl: Cells are
// one object's cells, in the order of Columns.
type TableConvertor[T runtime.Object] struct {
	Columns []metav1.TableColumnDefinition
	Cells   func(obj T, name, age string) []interface{}
}

// ConvertToTable implements rest.TableConvertor.
func (c TableConvertor[T]) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := NewTable(obj, c.Columns)
	var err error
	table.Rows, err = metatable.MetaToTableRow(obj, func(obj runtime.Object, m metav1.Object, name, age string) ([]interface{}, error) {
		typed, ok := obj.(T)
		if !ok {
			return nil, fmt.Errorf("can't print %T in this table", obj)
		}
		return c.Cells(typed, name, age), nil
	})
	return table, err
}

// NewTable starts the table of obj (one object or a list) with columns.
func NewTable(obj runtime.Object, columns []metav1.TableColumnDefinition) *metav1.Table {
	table := &metav1.Table{ColumnDefinitions: columns}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table
}

// ResourceString is a resource rule as apiVersion/resource.
func ResourceString(r metacontroller.ResourceRule) string {
	return r.APIVersion + "/" + r.Resource
}

// HookString names where a hook is called: its url, or the service, port
// and path it resolves to.
func HookString(h *metacontroller.Hook) string {
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

// ReadyString is the status of the Ready condition, Unknown without one.
func ReadyString(conditions []metav1.Condition) string {
	if c := meta.FindStatusCondition(conditions, metacontroller.ConditionReady); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

// SinceString is how long ago t was, <never> when unset.
func SinceString(t *metav1.Time) string {
	if t == nil {
		return "<never>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// RolloutString is a rollout's phase and step, "<none>" without one.
func RolloutString(st *metacontroller.RolloutStatus) string {
	switch {
	case st == nil:
		return "<none>"
	case st.Phase == metacontroller.RolloutComplete:
		return string(st.Phase)
	}
	return fmt.Sprintf("%s %d/%d", st.Phase, min(st.Step+1, st.Steps), st.Steps)
}
