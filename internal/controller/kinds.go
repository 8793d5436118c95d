package controller

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/controllerstatus"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	informers "github.com/composite-apiserver/composite-apiserver/pkg/generated/informers/externalversions"
)

// controllerObject is a controller as written: a CompositeController or a
// DecoratorController, read through the accessors both kinds have on
// their API types. Events about its loop are recorded on it.
type controllerObject = v1alpha1.Controller

// kind is what the loop does differently for each kind of controller:
// where it reads one and where its status goes. What both kinds have
// (revisions, rollout, author, status) is read and written through
// v1alpha1.Controller, and definition.Compile compiles either; everything
// else (informers, queues, workers, the sync) reads only the compiled
// definition. Each kind is one entry of kinds, made by kindEntry.kind.
type kind struct {
	// name is the Kind, as in Events and logs.
	name string
	// keyPrefix tells the kind's keys in the manager's queue from the
	// others'; CompositeControllers have none (a name has no '/').
	keyPrefix string
	// watch starts following the kind's controllers in factory and
	// returns their informer.
	watch  func(m *Manager, factory informers.SharedInformerFactory) cache.SharedIndexInformer
	get    func(m *Manager, name string) (controllerObject, error)
	status func(m *Manager) controllerstatus.Store
	// rollouts reads and writes the kind's rollout status for its driver.
	rollouts func(m *Manager) rolloutStore
}

// revisions are a controller's revisions and its rollout, whatever its
// kind (revisionsOf).
type revisions struct {
	// revision is the spec's (status.revision), 1 for a controller
	// written before revisions were numbered.
	revision int64
	// rollout is spec.rollout; status its status.
	rollout *v1alpha1.ControllerRollout
	status  *v1alpha1.RolloutStatus
	// at is the controller as it was at an earlier revision of its
	// history (its spec and author), and whether the history has it.
	at func(revision int64) (controllerObject, bool)
	// newest is the newest revision of the history, 0 when it is empty.
	newest int64
}

// kindEntry is one kind of controller, of Go type T, in the terms of its
// own API type; kind makes it the loop's.
type kindEntry[T controllerObject] struct {
	name, keyPrefix string
	// informer is the kind's informer in factory, and sets the lister the
	// manager reads the kind through.
	informer func(m *Manager, factory informers.SharedInformerFactory) cache.SharedIndexInformer
	lister   func(m *Manager) getter[T]
	// updateStatus writes the kind's status to the API.
	updateStatus func(ctx context.Context, m *Manager, obj T) error
	// getLive reads the controller from the API, not the informer.
	getLive func(ctx context.Context, m *Manager, name string) (T, error)
}

type getter[T any] interface {
	Get(name string) (T, error)
}

var (
	compositeKind = kindEntry[*v1alpha1.CompositeController]{
		name: definition.KindComposite,
		informer: func(m *Manager, factory informers.SharedInformerFactory) cache.SharedIndexInformer {
			inf := factory.Metacontroller().V1alpha1().CompositeControllers()
			m.ccLister = inf.Lister()
			return inf.Informer()
		},
		lister: func(m *Manager) getter[*v1alpha1.CompositeController] { return m.ccLister },
		updateStatus: func(ctx context.Context, m *Manager, cc *v1alpha1.CompositeController) error {
			_, err := m.cfg.Client.MetacontrollerV1alpha1().CompositeControllers().UpdateStatus(ctx, cc, metav1.UpdateOptions{})
			return err
		},
		getLive: func(ctx context.Context, m *Manager, name string) (*v1alpha1.CompositeController, error) {
			return m.cfg.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		},
	}.kind()
	decoratorKind = kindEntry[*v1alpha1.DecoratorController]{
		name:      definition.KindDecorator,
		keyPrefix: "decoratorcontroller/",
		informer: func(m *Manager, factory informers.SharedInformerFactory) cache.SharedIndexInformer {
			inf := factory.Metacontroller().V1alpha1().DecoratorControllers()
			m.dcLister = inf.Lister()
			return inf.Informer()
		},
		lister: func(m *Manager) getter[*v1alpha1.DecoratorController] { return m.dcLister },
		updateStatus: func(ctx context.Context, m *Manager, dc *v1alpha1.DecoratorController) error {
			_, err := m.cfg.Client.MetacontrollerV1alpha1().DecoratorControllers().UpdateStatus(ctx, dc, metav1.UpdateOptions{})
			return err
		},
		getLive: func(ctx context.Context, m *Manager, name string) (*v1alpha1.DecoratorController, error) {
			return m.cfg.Client.MetacontrollerV1alpha1().DecoratorControllers().Get(ctx, name, metav1.GetOptions{})
		},
	}.kind()

	// kinds are every kind the loop runs.
	kinds = []kind{compositeKind, decoratorKind}
)

// kind is the entry as the loop uses it.
func (e kindEntry[T]) kind() kind {
	k := kind{name: e.name, keyPrefix: e.keyPrefix, watch: e.informer}
	k.get = func(m *Manager, name string) (controllerObject, error) {
		obj, err := e.lister(m).Get(name)
		if err != nil {
			return nil, err
		}
		return obj, nil
	}
	k.status = func(m *Manager) controllerstatus.Store { return kindStatus[T]{entry: e, m: m} }
	k.rollouts = func(m *Manager) rolloutStore { return kindStatus[T]{entry: e, m: m} }
	return k
}

// kindOf splits a key of the manager's queue into the controller's kind
// and name.
func kindOf(key string) (kind, string) {
	for _, k := range kinds {
		if name, ok := strings.CutPrefix(key, k.keyPrefix); ok && k.keyPrefix != "" {
			return k, name
		}
	}
	return compositeKind, key
}

// restartsOn tells whether an update of a controller of kind k from old to
// cur restarts its loop. Our own status writes do not change the
// generation: only spec changes restart a controller, and a new author
// (whose rights its checks are made against).
func (k kind) restartsOn(old, cur controllerObject) bool {
	return old.GetGeneration() != cur.GetGeneration() || !equality.Semantic.DeepEqual(old.GetAuthor(), cur.GetAuthor()) ||
		old.GetAnnotations()[v1alpha1.RolloutResumedAnnotation] != cur.GetAnnotations()[v1alpha1.RolloutResumedAnnotation]
}

// rolloutStore is what a rollout's driver needs of the kind's status
// beyond controllerstatus.Store: a write its change may refuse, and the
// status read from the API.
type rolloutStore interface {
	mutate(ctx context.Context, name string, uid types.UID, change func(*controllerstatus.Status) error) error
	rolloutStatus(ctx context.Context, name string, uid types.UID) (*v1alpha1.RolloutStatus, error)
}

// kindStatus is the controllerstatus.Store of every kind, through its entry.
type kindStatus[T controllerObject] struct {
	entry kindEntry[T]
	m     *Manager
}

func (s kindStatus[T]) Mutate(ctx context.Context, name string, uid types.UID, change func(*controllerstatus.Status)) error {
	return s.mutate(ctx, name, uid, func(t *controllerstatus.Status) error {
		change(t)
		return nil
	})
}

// mutate is Mutate with a change that may refuse: its error is returned,
// and nothing written.
func (s kindStatus[T]) mutate(ctx context.Context, name string, uid types.UID, change func(*controllerstatus.Status) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := s.entry.lister(s.m).Get(name)
		if err != nil || current.GetUID() != uid {
			return err
		}
		updated := current.DeepCopyObject().(T)
		t := updated.GetLoopStatus()
		if err := change(&t); err != nil {
			return err
		}
		updated.SetLoopStatus(t)
		return s.entry.updateStatus(ctx, s.m, updated)
	})
}

// rolloutStatus is the controller's rollout status as stored now, read
// from the API, nil when it is gone or another one (not uid).
func (s kindStatus[T]) rolloutStatus(ctx context.Context, name string, uid types.UID) (*v1alpha1.RolloutStatus, error) {
	obj, err := s.entry.getLive(ctx, s.m, name)
	if err != nil || obj.GetUID() != uid {
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return nil, err
	}
	return obj.GetRolloutStatus(), nil
}

// revisionsOf reads a controller's revisions and rollout.
func revisionsOf(obj controllerObject) revisions {
	return revisions{revision: max(obj.GetRevision(), 1), rollout: obj.GetRollout(), status: obj.GetRolloutStatus(),
		at: obj.ControllerAtRevision, newest: obj.GetNewestRevision()}
}
