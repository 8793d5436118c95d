// Package rights tells which of the rights a CompositeController needs the
// server itself lacks in the target cluster. The server acts with its own
// identity and is granted rights per controller (the aggregated ClusterRole
// of artifacts/deploy), so a missing grant must be said where the user
// looks — the controller's status, an Event, a warning on apply — and not
// only in the server's log.
package rights

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
)

// Right is one verb on one resource, cluster-wide: the loop watches and
// writes in every namespace.
type Right struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
}

func (r Right) String() string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	return r.Verb + " " + res
}

// Needed are the rights the loop uses for cc: what the informers read,
// what apply, adoption, deletion, the finalizer and the status write do,
// and the Events it records.
func Needed(cc *v1alpha1.CompositeController) ([]Right, error) {
	res, err := syncengine.ResourcesOf(cc)
	if err != nil {
		return nil, err
	}
	var out []Right
	add := func(gvr schema.GroupVersionResource, sub string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, Right{Verb: v, Group: gvr.Group, Resource: gvr.Resource, Subresource: sub})
		}
	}
	// get: adoption reads the parent again; patch: the finalizer.
	add(res.Parent, "", "get", "list", "watch", "patch")
	add(res.Parent, "status", "update")
	for _, child := range res.Children {
		// A server-side apply that creates needs create as well as patch.
		add(child, "", "list", "watch", "create", "patch", "delete")
	}
	add(schema.GroupVersionResource{Version: "v1", Resource: "events"}, "", "create")
	return out, nil
}

// Checker asks the target cluster about the server's own rights.
type Checker struct {
	Kube kubernetes.Interface
}

// Missing returns the rights cc needs that the server lacks.
func (c *Checker) Missing(ctx context.Context, cc *v1alpha1.CompositeController) ([]Right, error) {
	needed, err := Needed(cc)
	if err != nil {
		return nil, err
	}
	var missing []Right
	seen := map[Right]bool{}
	for _, r := range needed {
		if seen[r] {
			continue
		}
		seen[r] = true
		review, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: r.Verb, Group: r.Group, Resource: r.Resource, Subresource: r.Subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("can't ask the target cluster whether this server may %s: %w", r, err)
		}
		if !review.Status.Allowed {
			missing = append(missing, r)
		}
	}
	// In Needed's order: resources as the spec names them, verbs as a
	// person reads them (get, list, watch, ...).
	return missing, nil
}

// MissingRights says what cc needs and the server lacks, with the fix; ""
// when nothing is missing.
func (c *Checker) MissingRights(ctx context.Context, cc *v1alpha1.CompositeController) (string, error) {
	missing, err := c.Missing(ctx, cc)
	if err != nil || len(missing) == 0 {
		return "", err
	}
	return Describe(cc, missing), nil
}

// Describe says in one line what is missing, per resource, and the fix.
func Describe(cc *v1alpha1.CompositeController, missing []Right) string {
	byResource := map[string][]string{}
	var order []string
	for _, r := range missing {
		key := Right{Group: r.Group, Resource: r.Resource, Subresource: r.Subresource}.String()
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
		strings.Join(parts, "; "), cc.Name)
}
