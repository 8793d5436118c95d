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
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
	"github.com/composite-apiserver/composite-apiserver/pkg/target"
)

// Impersonator gives clients that act as a ServiceAccount.
type Impersonator = rights.Impersonator

// actor is whom one controller's loop acts as and is checked against: its
// ServiceAccount, through impersonating clients, or the server with the
// rights of the controller's recorded author.
type actor struct {
	subject rights.Subject
	// readers must all be allowed the related objects its hooks are sent
	// (rights.ReadersOf).
	readers []rights.Subject
	// clients write (and read credentials) as the identity; nil when the
	// controller has none and the server's own clients serve.
	clients *target.Clients
}

// authorUnknownError is a controller that can't run until someone writes it.
type authorUnknownError struct{ err error }

func (e *authorUnknownError) Error() string { return e.err.Error() }

// actorFor works out whom the loop of def's controller acts as, and refuses to start one whose
// identity is missing or whose subject may not read the Secrets and
// ConfigMaps its hooks' credentials come from: the loop never reads one
// for a controller whose checks it did not pass.
func (m *Manager) actorFor(ctx context.Context, def *definition.Definition) (*actor, error) {
	subject, err := m.cfg.Identity.SubjectOf(def)
	if err != nil {
		return nil, &authorUnknownError{err: err}
	}
	a := &actor{subject: subject}
	if a.readers, err = m.cfg.Identity.ReadersOf(def); err != nil {
		return nil, &authorUnknownError{err: err}
	}
	if sa := subject.ServiceAccount; sa != nil {
		if m.cfg.Impersonator == nil {
			return nil, fmt.Errorf("can't act as %s: the server has no way to impersonate", subject)
		}
		if err := m.serviceAccounts.exists(ctx, *sa); err != nil {
			return nil, err
		}
		if a.clients, err = m.cfg.Impersonator.As(sa.Namespace, sa.Name); err != nil {
			return nil, err
		}
	}
	if err := m.access.CheckReferences(ctx, def, a.readers); err != nil {
		return nil, forbidden(err)
	}
	return a, nil
}

// forbidden makes a refusal a forbiddenError, which the manager retries
// soon: rights are granted at any moment.
func forbidden(err error) error {
	var f *rights.ForbiddenError
	if errors.As(err, &f) {
		return &forbiddenError{message: err.Error()}
	}
	return err
}

// secrets is where the hooks' credentials are read: as the identity when
// there is one.
func (a *actor) secrets(server hooks.SecretSource) hooks.SecretSource {
	if a.clients == nil {
		return server
	}
	return hooks.NewClusterSecretSource(a.clients.Kube)
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

func newServiceAccounts(m *Manager) *serviceAccounts {
	return &serviceAccounts{
		get: func(ctx context.Context, namespace, name string) error {
			_, err := m.cfg.Kube.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
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
		err = &forbiddenError{message: fmt.Sprintf("ServiceAccount %s/%s, the controller's identity (spec.serviceAccount), does not exist: nothing is done for the controller until it does", sa.Namespace, sa.Name)}
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
	return &forbiddenError{message: strings.Join(denied, "; ") +
		": nothing is done for the controller until they may again, or until someone who may writes it"}
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
// running, due again when reconcile retries with err.
func (m *Manager) authorRevoked(ctx context.Context, key string, def *definition.Definition) (stop bool, err error) {
	m.waitingMu.Lock()
	due := m.recheck[key]
	delete(m.recheck, key)
	m.waitingMu.Unlock()
	if !due {
		return false, nil
	}
	err = m.checkAuthor(ctx, def)
	var refused *forbiddenError
	switch {
	case errors.As(err, &refused):
		klog.FromContext(ctx).Info("The controller's author may no longer do what its loop does: stopping it", "author", def.Author.Username, "missing", err.Error())
		return true, nil
	case err != nil:
		m.waitingMu.Lock()
		m.recheck[key] = true
		m.waitingMu.Unlock()
		return false, err
	}
	return false, nil
}
