package fleetpreview

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/composite-apiserver/composite-apiserver/internal/syncrequest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// parentChunk is how many parents one list of the target cluster reads.
// It is fixed, not the request's limit, so that a position in a chunk (a
// continue token and an offset) names the same parents on the next
// request, whatever that request's limit.
const parentChunk = 500

// position is where a page of a fleet preview starts: a continue token of
// the target cluster's list of parents (in one namespace, or in all of
// them when the caller may list them all), and how many parents of the
// chunk that token lists were previewed already. The cluster's token is
// opaque here: it is only ever handed back to the cluster, which checks
// it, so a forged one gets nothing the caller could not list.
type position struct {
	// AllNamespaces says the parents are listed in all namespaces at once;
	// otherwise namespace by namespace, those where the caller may list
	// them.
	AllNamespaces bool   `json:"a,omitempty"`
	Namespace     string `json:"ns,omitempty"`
	Continue      string `json:"c,omitempty"`
	Skip          int    `json:"s,omitempty"`
	// View is which of the controller's parent resources the page is of
	// (definition.Parents: a DecoratorController decorates several).
	View int `json:"v,omitempty"`
}

func (p position) token() string {
	data, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(data)
}

func parsePosition(token string) (position, error) {
	var p position
	if token == "" {
		return p, nil
	}
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	if err != nil || p.Skip < 0 || p.View < 0 {
		return p, apierrors.NewBadRequest("spec.continue is not a token a fleet preview answered; send status.continue of the previous page as it was")
	}
	return p, nil
}

// candidate is a parent to preview, with the position of a page that
// starts at it: where the next page goes on when the request's deadline
// stops the preview before this parent.
type candidate struct {
	parent *unstructured.Unstructured
	at     position
}

// gather lists up to f.limit parents from f.start on, in the caller's
// namespaces, and returns them with the position after the last one;
// done when no parent is left after them.
func (f *fleet) gather(ctx context.Context) (cands []candidate, next position, done bool, err error) {
	pos := f.start
	if pos.AllNamespaces != f.allNamespaces {
		return nil, pos, false, apierrors.NewBadRequest("spec.continue was answered while your rights to list the parents were different; start again without it")
	}
	var namespaces []string
	if !f.allNamespaces {
		// Resume in the token's namespace or the first after it: one
		// deleted meanwhile is simply past.
		if namespaces, err = f.namespaces(ctx, pos.Namespace); err != nil {
			return nil, pos, false, err
		}
		if namespaces = f.listable(ctx, namespaces); len(namespaces) == 0 {
			return nil, position{}, true, nil
		}
		if namespaces[0] != pos.Namespace {
			pos = position{Namespace: namespaces[0], View: f.view}
		}
	}
	gvr := f.def.Parent.GVR
	for len(cands) < f.limit {
		list, err := f.r.sync.Cluster().Dynamic.Resource(gvr).Namespace(pos.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: f.selector.String(), Limit: parentChunk, Continue: pos.Continue,
		})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				// As a list answers an expired token: 410, start again.
				return nil, pos, false, err
			}
			return nil, pos, false, fmt.Errorf("can't list %s: %w", gvr.GroupResource(), err)
		}
		i := min(pos.Skip, len(list.Items))
		for ; i < len(list.Items) && len(cands) < f.limit; i++ {
			if !f.def.Handles(&list.Items[i]) {
				// Not the controller's: an annotation selector, which
				// a list cannot ask for, does not pick it.
				continue
			}
			at := pos
			at.Skip = i
			cands = append(cands, candidate{parent: &list.Items[i], at: at})
		}
		if i < len(list.Items) {
			// The page ends inside this chunk.
			pos.Skip = i
			return cands, pos, false, nil
		}
		if c := list.GetContinue(); c != "" {
			pos = position{AllNamespaces: f.allNamespaces, Namespace: pos.Namespace, Continue: c, View: f.view}
			continue
		}
		if f.allNamespaces {
			return cands, position{}, true, nil
		}
		if namespaces = f.listable(ctx, namespaces[1:]); len(namespaces) == 0 {
			return cands, position{}, true, nil
		}
		pos = position{Namespace: namespaces[0], View: f.view}
	}
	return cands, pos, false, nil
}

// namespaces are, sorted, the namespaces from the one named from on.
func (f *fleet) namespaces(ctx context.Context, from string) ([]string, error) {
	list, err := f.r.sync.Cluster().Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("can't list namespaces: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		if ns.Name >= from {
			names = append(names, ns.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// listable drops the leading namespaces where the caller may not list the
// parent resource: they contribute nothing to a preview, not even their
// names. Asked one namespace at a time, as a page reaches it, so that a
// page asks about the namespaces it reads, not about every namespace.
func (f *fleet) listable(ctx context.Context, namespaces []string) []string {
	for len(namespaces) > 0 && syncrequest.Authorize(ctx, f.authz, "list", f.def.Parent.GVR, namespaces[0], "") != nil {
		namespaces = namespaces[1:]
	}
	return namespaces
}
