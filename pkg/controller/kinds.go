package controller

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
)

// controllerObject is a controller as written: a CompositeController or a
// DecoratorController. Events about its loop are recorded on it.
type controllerObject interface {
	runtime.Object
	metav1.Object
}

// kind is what the loop does differently for each kind of controller:
// where it reads one, how it compiles it and where its status goes.
// Everything else (informers, queues, workers, the sync) reads only the
// compiled definition.
type kind struct {
	// name is the Kind, as in Events and logs.
	name string
	// keyPrefix tells the kind's keys in the manager's queue from the
	// others'; CompositeControllers have none (a name has no '/').
	keyPrefix string
	get       func(m *Manager, name string) (controllerObject, error)
	compile   func(obj controllerObject, resolver definition.KindResolver) (*definition.Definition, error)
	status    func(m *Manager) statusStore
	// author is the controller's recorded author (status.author).
	author func(obj controllerObject) *v1alpha1.ControllerAuthor
}

var (
	compositeKind = kind{
		name: definition.KindComposite,
		get: func(m *Manager, name string) (controllerObject, error) {
			cc, err := m.ccLister.Get(name)
			if err != nil {
				return nil, err
			}
			return cc, nil
		},
		compile: func(obj controllerObject, resolver definition.KindResolver) (*definition.Definition, error) {
			return definition.Compile(obj.(*v1alpha1.CompositeController), resolver)
		},
		status: func(m *Manager) statusStore { return compositeStatus{m} },
		author: func(obj controllerObject) *v1alpha1.ControllerAuthor {
			return obj.(*v1alpha1.CompositeController).Status.Author
		},
	}
	decoratorKind = kind{
		name:      definition.KindDecorator,
		keyPrefix: "decoratorcontroller/",
		get: func(m *Manager, name string) (controllerObject, error) {
			dc, err := m.dcLister.Get(name)
			if err != nil {
				return nil, err
			}
			return dc, nil
		},
		compile: func(obj controllerObject, resolver definition.KindResolver) (*definition.Definition, error) {
			return definition.Compile(obj.(*v1alpha1.DecoratorController), resolver)
		},
		status: func(m *Manager) statusStore { return decoratorStatus{m} },
		author: func(obj controllerObject) *v1alpha1.ControllerAuthor {
			return obj.(*v1alpha1.DecoratorController).Status.Author
		},
	}
)

// kindOf splits a key of the manager's queue into the controller's kind
// and name.
func kindOf(key string) (kind, string) {
	if name, ok := strings.CutPrefix(key, decoratorKind.keyPrefix); ok {
		return decoratorKind, name
	}
	return compositeKind, key
}

// trackedStatus is the status of a controller of either kind, as the loop
// keeps it: a CompositeController's parents and children are a
// DecoratorController's objects and attachments.
type trackedStatus struct {
	ObservedGeneration int64
	Conditions         []metav1.Condition
	Parents, Children  int32
	RollingParents     int32
	LastSyncTime       *metav1.Time
	LastSyncError      string
}

// statusStore reads and writes the status of one kind of controller.
type statusStore interface {
	// mutate applies change to the status of the controller named name,
	// read from the informer's cache, and writes it, unless the
	// controller is gone or is another one now (not uid); it retries on
	// a conflict.
	mutate(ctx context.Context, name string, uid types.UID, change func(*trackedStatus)) error
}

type compositeStatus struct{ m *Manager }

func (s compositeStatus) mutate(ctx context.Context, name string, uid types.UID, change func(*trackedStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := s.m.ccLister.Get(name)
		if err != nil || current.UID != uid {
			return err
		}
		updated := current.DeepCopy()
		st := &updated.Status
		t := trackedStatus{st.ObservedGeneration, st.Conditions, st.Parents, st.Children, st.RollingParents, st.LastSyncTime, st.LastSyncError}
		change(&t)
		updated.Status = v1alpha1.CompositeControllerStatus{ObservedGeneration: t.ObservedGeneration, Conditions: t.Conditions,
			Parents: t.Parents, Children: t.Children, RollingParents: t.RollingParents, LastSyncTime: t.LastSyncTime, LastSyncError: t.LastSyncError}
		_, err = s.m.cfg.Client.MetacontrollerV1alpha1().CompositeControllers().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
}

type decoratorStatus struct{ m *Manager }

func (s decoratorStatus) mutate(ctx context.Context, name string, uid types.UID, change func(*trackedStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := s.m.dcLister.Get(name)
		if err != nil || current.UID != uid {
			return err
		}
		updated := current.DeepCopy()
		st := &updated.Status
		t := trackedStatus{ObservedGeneration: st.ObservedGeneration, Conditions: st.Conditions, Parents: st.Objects, Children: st.Attachments,
			LastSyncTime: st.LastSyncTime, LastSyncError: st.LastSyncError}
		change(&t)
		updated.Status = v1alpha1.DecoratorControllerStatus{ObservedGeneration: t.ObservedGeneration, Conditions: t.Conditions,
			Objects: t.Parents, Attachments: t.Children, LastSyncTime: t.LastSyncTime, LastSyncError: t.LastSyncError}
		_, err = s.m.cfg.Client.MetacontrollerV1alpha1().DecoratorControllers().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
}
