// Package rights checks rights around a controller: which of the rights its
// loop uses (the list internal/definition compiles with it, Needed) the server
// itself lacks in the target cluster, and whether a controller's author may
// do what its loop would (AuthorRights, derived from Needed).
//
// The server acts with its own identity and is granted rights per
// controller (the aggregated ClusterRole of artifacts/deploy), so a missing
// grant must be said where the user looks — the controller's status, an
// Event, a warning on apply — and not only in the server's log.
package rights

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// maxConcurrentReviews bounds the access reviews one check has in flight.
// A controller's rights are 10 to 40, each a SubjectAccessReview to
// kube-apiserver unless an answer is cached: 8 at once answers a check in a
// few round trips, where one goroutine each would let a burst of applies
// put hundreds of reviews at once into the queue kube-apiserver's priority
// and fairness keeps for this server, ahead of the loop's own requests.
const maxConcurrentReviews = 8

// Needed are the rights the loop uses for def: the one list, compiled with
// the definition, from which AuthorRights and `kubectl composite rbac`
// are derived.
func Needed(def *definition.Definition) []definition.Right { return def.Rights }

// Checker asks the target cluster about the server's own rights. Answers
// are kept for cacheTTL, as kube-apiserver's delegating authorizer keeps
// its own: an apply that checks them must cost no round trips when the
// answer is fresh, and a grant shows within seconds.
type Checker struct {
	Kube kubernetes.Interface
	// Identity tells which controllers act as a ServiceAccount, for which
	// the server needs only its reads.
	Identity IdentityPolicy

	mu    sync.Mutex
	cache map[definition.Right]cached
	now   func() time.Time
}

type cached struct {
	allowed bool
	expires time.Time
}

const cacheTTL = 10 * time.Second

// Missing returns the rights def needs that the server lacks, asking about
// the ones not known now at once (maxConcurrentReviews at a time).
func (c *Checker) Missing(ctx context.Context, def *definition.Definition) ([]definition.Right, error) {
	return c.MissingOf(ctx, Needed(def))
}

// MissingOf returns the rights of needed that the server lacks.
func (c *Checker) MissingOf(ctx context.Context, needed []definition.Right) ([]definition.Right, error) {
	allowed := c.lookup(needed)
	var unknown []definition.Right
	for _, r := range needed {
		if _, ok := allowed[r]; !ok {
			unknown = append(unknown, r)
		}
	}
	answers := make([]bool, len(unknown))
	errs := make([]error, len(unknown))
	var g errgroup.Group
	g.SetLimit(maxConcurrentReviews)
	for i, r := range unknown {
		g.Go(func() error {
			// Every answer is wanted: errors are joined below, not
			// returned to cancel the others.
			answers[i], errs[i] = c.ask(ctx, r)
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.store(unknown, answers)
	for i, r := range unknown {
		allowed[r] = answers[i]
	}
	// In Needed's order: resources as the spec names them, verbs as a
	// person reads them (get, list, watch, ...).
	var missing []definition.Right
	seen := map[definition.Right]bool{}
	for _, r := range needed {
		if !allowed[r] && !seen[r] {
			seen[r] = true
			missing = append(missing, r)
		}
	}
	return missing, nil
}

func (c *Checker) ask(ctx context.Context, r definition.Right) (bool, error) {
	review, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: r.Verb, Group: r.Group, Resource: r.Resource, Subresource: r.Subresource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("can't ask the target cluster whether this server may %s: %w", r, err)
	}
	return review.Status.Allowed, nil
}

func (c *Checker) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// lookup returns the fresh answers the cache has for rights.
func (c *Checker) lookup(rights []definition.Right) map[definition.Right]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[definition.Right]bool{}
	now := c.clock()
	for _, r := range rights {
		if e, ok := c.cache[r]; ok && now.Before(e.expires) {
			out[r] = e.allowed
		}
	}
	return out
}

func (c *Checker) store(rights []definition.Right, allowed []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[definition.Right]cached{}
	}
	expires := c.clock().Add(cacheTTL)
	for i, r := range rights {
		c.cache[r] = cached{allowed: allowed[i], expires: expires}
	}
}

// ServerRights are the rights the server itself needs for def: all of them
// when the controller acts with the server's identity; with an identity of
// its own, only the reads of the server's shared informers and its Events,
// every write being the identity's.
func ServerRights(def *definition.Definition, identity bool) []definition.Right {
	if !identity {
		return Needed(def)
	}
	var out []definition.Right
	for _, r := range Needed(def) {
		events := r.Group == definition.Events.Group && r.Resource == definition.Events.Resource
		revisions := r.Group == definition.ControllerRevisions.Group && r.Resource == definition.ControllerRevisions.Resource
		if events || (r.Verb == "list" || r.Verb == "watch") && r.Subresource == "" && !revisions {
			out = append(out, r)
		}
	}
	return out
}

// MissingRights says what controller (a v1alpha1 CompositeController or
// DecoratorController) needs and the server lacks, with the fix; "" when
// nothing is missing. It is asked when the controller is applied, before
// the loop compiled it.
func (c *Checker) MissingRights(ctx context.Context, controller runtime.Object) (string, error) {
	def, err := definition.Compile(controller, nil)
	if err != nil {
		return "", err
	}
	missing, err := c.MissingOf(ctx, ServerRights(def, c.Identity.Identity(def) != nil))
	if err != nil || len(missing) == 0 {
		return "", err
	}
	return Describe(def.Name, missing), nil
}

// Describe says in one line what the controller named controller lacks,
// per resource, and the fix.
func Describe(controller string, missing []definition.Right) string {
	byResource := map[string][]string{}
	var order []string
	for _, r := range missing {
		key := definition.Right{Group: r.Group, Resource: r.Resource, Subresource: r.Subresource}.String()
		key = strings.TrimSpace(key)
		if _, ok := byResource[key]; !ok {
			order = append(order, key)
		}
		byResource[key] = append(byResource[key], r.Verb)
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, strings.Join(byResource[k], ", ")+" "+k)
	}
	return fmt.Sprintf("composite-apiserver may not %s in the target cluster; grant it with `kubectl composite rbac %s | kubectl apply -f -`",
		strings.Join(parts, "; "), controller)
}
