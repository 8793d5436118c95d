package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// Impersonator gives clients that act as a ServiceAccount.
type Impersonator = rights.Impersonator

// authorUnknownError is a controller that can't run until someone writes it.
type authorUnknownError struct{ err error }

func (e *authorUnknownError) Error() string { return e.err.Error() }

// identities work out whom each controller's loop acts as
// (parentloop.Identity): its ServiceAccount, through impersonating
// clients, or the server with the rights of its recorded author.
type identities struct {
	policy       rights.IdentityPolicy
	impersonator Impersonator
	// access checks controllers' subjects; serviceAccounts, that their
	// identities exist.
	access          rights.Access
	serviceAccounts *serviceAccounts
}

var _ parentloop.Identity = &identities{}

func newIdentities(cfg Config) *identities {
	return &identities{
		policy:          cfg.Identity,
		impersonator:    cfg.Impersonator,
		access:          rights.Access{Authorizer: cfg.Authorizer},
		serviceAccounts: newServiceAccounts(cfg.Kube),
	}
}

// ActorFor works out whom the loop of def's controller acts as
// (rights.Actors, the decision /sync and the fleet preview make too), and
// refuses to start one whose identity is missing or whose subject may not
// read the Secrets and ConfigMaps its hooks' credentials come from: the
// loop never reads one for a controller whose checks it did not pass.
func (i *identities) ActorFor(ctx context.Context, def *definition.Definition) (*rights.Actor, error) {
	actors := rights.Actors{
		Policy:               i.policy,
		Impersonator:         i.impersonator,
		Access:               i.access,
		ServiceAccountExists: i.serviceAccounts.exists,
	}
	a, err := actors.For(ctx, def)
	var unknown *rights.UnknownSubjectError
	var refused *rights.ReferencesError
	switch {
	case errors.As(err, &unknown):
		return nil, &authorUnknownError{err: unknown.Err}
	case errors.As(err, &refused):
		return nil, parentloop.Forbidden(refused.Err)
	}
	return a, err
}

// ServiceAccountExists tells whether the identity sa exists.
func (i *identities) ServiceAccountExists(ctx context.Context, sa v1alpha1.ServiceAccountReference) error {
	return i.serviceAccounts.exists(ctx, sa)
}

// serviceAccounts tells whether identities exist, remembering the answer
// for a few seconds: impersonating a deleted ServiceAccount still works
// wherever a RoleBinding names it, so the loop looks for itself.
type serviceAccounts struct {
	get func(ctx context.Context, namespace, name string) error

	mu      sync.Mutex
	checked map[v1alpha1.ServiceAccountReference]saAnswer
}

type saAnswer struct {
	err     error
	expires time.Time
}

const serviceAccountTTL = 5 * time.Second

func newServiceAccounts(kube kubernetes.Interface) *serviceAccounts {
	return &serviceAccounts{
		get: func(ctx context.Context, namespace, name string) error {
			_, err := kube.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		checked: map[v1alpha1.ServiceAccountReference]saAnswer{},
	}
}

func (s *serviceAccounts) exists(ctx context.Context, sa v1alpha1.ServiceAccountReference) error {
	s.mu.Lock()
	answer, ok := s.checked[sa]
	s.mu.Unlock()
	if ok && time.Now().Before(answer.expires) {
		return answer.err
	}
	err := s.get(ctx, sa.Namespace, sa.Name)
	switch {
	case apierrors.IsNotFound(err):
		err = &parentloop.ForbiddenError{Message: fmt.Sprintf("ServiceAccount %s/%s, the controller's identity (spec.serviceAccount), does not exist: nothing is done for the controller until it does", sa.Namespace, sa.Name)}
	case err != nil:
		return fmt.Errorf("can't tell whether ServiceAccount %s/%s exists: %w", sa.Namespace, sa.Name, err)
	}
	s.mu.Lock()
	s.checked[sa] = saAnswer{err: err, expires: time.Now().Add(serviceAccountTTL)}
	s.mu.Unlock()
	return err
}

// DefaultAuthorRecheck is how often the authors of running controllers are
// checked again when the loop resyncs no parents (--resync-period=0).
const DefaultAuthorRecheck = 30 * time.Minute

// checkAuthor refuses to run a controller whose recorded author may no
// longer do what writing it required (rights.AuthorRights): the loop acts
// on their word for as long as it runs, and rights are revoked at any
// moment. The author is asked with the groups recorded at the
// controller's last write, as every check of the loop is. A controller
// without a recorded author has nothing to check here (SubjectOf refuses
// it where it needs one).
func (m *Manager) checkAuthor(ctx context.Context, def *definition.Definition) error {
	author, ok := rights.AuthorSubject(def.Author)
	if !ok || m.cfg.Authorizer == nil {
		return nil
	}
	missing, err := rights.Missing(genericapirequest.WithUser(ctx, author.User), m.cfg.Authorizer, rights.AuthorRights(def))
	if err != nil {
		return fmt.Errorf("can't check the rights of the controller's author %q: %w", author.User.GetName(), err)
	}
	if len(missing) == 0 {
		return nil
	}
	denied := make([]string, 0, len(missing))
	for _, r := range missing {
		denied = append(denied, (&rights.ForbiddenError{Subject: author, Right: r}).Error())
	}
	return &parentloop.ForbiddenError{Message: strings.Join(denied, "; ") +
		": nothing is done for the controller until they may again, or until someone who may writes it"}
}

// forgetRecheck drops a re-check due for a controller that is gone, whose
// key would otherwise stay in recheck for the life of the process (R20).
func (m *Manager) forgetRecheck(key string) {
	m.waitingMu.Lock()
	defer m.waitingMu.Unlock()
	delete(m.recheck, key)
}

// recheckAuthors marks every running controller's author as due for
// checkAuthor and queues the controller, every period, until ctx is done.
func (m *Manager) recheckAuthors(ctx context.Context, period time.Duration) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		m.waitingMu.Lock()
		for name := range m.started {
			m.recheck[name] = true
			m.queue.Add(name)
		}
		m.waitingMu.Unlock()
	}
}

// authorRevoked checks the author of the running controller of key when it
// is due, and tells whether the controller must stop: its author may no
// longer do what it does. A check that could not be made leaves it
// running, due again when updateRun retries with err.
func (m *Manager) authorRevoked(ctx context.Context, key string, defs ...*definition.Definition) (stop bool, err error) {
	m.waitingMu.Lock()
	due := m.recheck[key]
	delete(m.recheck, key)
	m.waitingMu.Unlock()
	if !due {
		return false, nil
	}
	for _, def := range defs {
		if stop, err = m.authorRevokedOf(ctx, key, def); stop || err != nil {
			return stop, err
		}
	}
	return false, nil
}

// authorRevokedOf checks again the author of one definition the
// controller runs.
func (m *Manager) authorRevokedOf(ctx context.Context, key string, def *definition.Definition) (stop bool, err error) {
	err = m.checkAuthor(ctx, def)
	var refused *parentloop.ForbiddenError
	switch {
	case errors.As(err, &refused):
		klog.FromContext(ctx).Info("The author of a revision the controller runs may no longer do what its loop does: stopping it", "author", def.Author.Username, "missing", err.Error())
		return true, nil
	case err != nil:
		m.waitingMu.Lock()
		m.recheck[key] = true
		m.waitingMu.Unlock()
		return false, err
	}
	return false, nil
}
