package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// fleet is the fleet of the fleet preview tests: fleetParents hellos of
// the controller fleetController, spread over two namespaces, synced live
// once by the current hook so that their ConfigMaps exist. A third of them
// (every third) is labelled tier=gold, every tenth fail=yes: the proposed
// hooks answer those differently.
const (
	fleetController = "fleet-preview"
	fleetParents    = 50
)

var fleetNamespaces = []string{"fleet-a", "fleet-b"}

type fleetFixture struct {
	hookURL string
	cc      clientset.Interface
	dyn     dynamic.Interface
	// parents are namespace/name of every parent, gold and failing of
	// those so labelled.
	parents, gold, failing map[string]bool
}

var (
	fleetOnce sync.Once
	fleetFix  *fleetFixture
	fleetErr  error
)

// fleetHookAnswer is the hooks' answer for parent: a ConfigMap <parent>-cm
// whose color is the parent's spec.color, or teal for gold parents under
// the proposed hook, which also returns a Secret <parent>-token (the child
// type the proposal adds); the failing hook fails for failing parents, the
// slow one answers as the current one, 3 s late.
func fleetHookAnswer(hook string, parent *unstructured.Unstructured) (*hookapi.SyncHookResponse, error) {
	labels := parent.GetLabels()
	if hook == "slow" {
		// A deployment that answers in 3 s: pages of a short request
		// hold only the parents answered within its deadline.
		time.Sleep(3 * time.Second)
	}
	if hook == "failing" && labels["fail"] == "yes" {
		return nil, fmt.Errorf("the new hook deployment breaks on %s", parent.GetName())
	}
	color, _, _ := unstructured.NestedString(parent.Object, "spec", "color")
	if hook == "proposed" && labels["tier"] == "gold" {
		color = "teal"
	}
	children := []*unstructured.Unstructured{{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": parent.GetName() + "-cm"},
		"data":     map[string]interface{}{"color": color},
	}}}
	if hook == "proposed" {
		children = append(children, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]interface{}{"name": parent.GetName() + "-token"},
			"stringData": map[string]interface{}{"token": "t"},
		}})
	}
	return &hookapi.SyncHookResponse{Status: map[string]interface{}{"color": color}, Children: children}, nil
}

// setUpFleet creates the fleet once for the package's fleet tests.
func setUpFleet(t *testing.T) *fleetFixture {
	t.Helper()
	setUpHellos(t)
	fleetOnce.Do(func() { fleetFix, fleetErr = newFleet() })
	if fleetErr != nil {
		t.Fatal(fleetErr)
	}
	suite.SetUp(t)
	return fleetFix
}

func newFleet() (*fleetFixture, error) {
	ctx := context.Background()
	mux := http.NewServeMux()
	for _, h := range []string{"current", "proposed", "failing", "slow"} {
		mux.Handle("/"+h+"/sync", hookapi.SyncHandler(hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
			return fleetHookAnswer(h, req.Parent)
		})))
	}
	// Serves for the life of the test binary, as the package's Python hook.
	srv := httptest.NewServer(mux)
	f := &fleetFixture{hookURL: srv.URL, parents: map[string]bool{}, gold: map[string]bool{}, failing: map[string]bool{}}
	var err error
	if f.cc, err = clientset.NewForConfig(suite.AdminConfig); err != nil {
		return nil, err
	}
	if f.dyn, err = dynamic.NewForConfig(suite.AdminConfig); err != nil {
		return nil, err
	}
	for _, ns := range fleetNamespaces {
		if err := suite.CreateNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	controller := framework.ControllerFixture{Name: fleetController, HookURL: f.hookURL + "/current", SelectBy: "fleet", Timeout: "5s"}
	if err := suite.Apply(ctx, controller.Manifest()); err != nil {
		return nil, err
	}
	for i := 0; i < fleetParents; i++ {
		// 35 in fleet-a, 15 in fleet-b.
		ns := fleetNamespaces[0]
		if i >= 35 {
			ns = fleetNamespaces[1]
		}
		name := fmt.Sprintf("p%02d", i)
		labels := map[string]interface{}{"fleet": fleetController}
		key := ns + "/" + name
		f.parents[key] = true
		if i%3 == 0 {
			labels["tier"] = "gold"
			f.gold[key] = true
		}
		if i%10 == 0 {
			labels["fail"] = "yes"
			f.failing[key] = true
		}
		if _, err := f.dyn.Resource(hellosGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Hello",
			"metadata": map[string]interface{}{"name": name, "namespace": ns, "labels": labels},
			"spec":     map[string]interface{}{"color": "blue"},
		}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		// The loop is off in this package: a live sync makes the
		// parent's children and status as the loop would.
		if _, err := f.cc.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, fleetController, &v1alpha1.SyncRequest{
			Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: ns, Name: name}},
		}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("live sync of %s: %w", key, err)
		}
	}
	return f, nil
}

// proposal is the stored spec of the fleet's controller with the sync
// hook at hook, changed further by change.
func (f *fleetFixture) proposal(t *testing.T, hook string, change func(*v1alpha1.CompositeControllerSpec)) *v1alpha1.CompositeControllerSpec {
	t.Helper()
	stored, err := f.cc.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), fleetController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := stored.Spec.DeepCopy()
	url := f.hookURL + "/" + hook + "/sync"
	spec.Hooks.Sync.Webhook.URL = &url
	if change != nil {
		change(spec)
	}
	return spec
}

// previewAll previews spec with client, page after page of limit parents,
// and returns every page.
func previewAll(t *testing.T, client clientset.Interface, spec *v1alpha1.CompositeControllerSpec, limit int64) []*v1alpha1.FleetPreview {
	t.Helper()
	var pages []*v1alpha1.FleetPreview
	next := ""
	for {
		page, err := client.MetacontrollerV1alpha1().CompositeControllers().Preview(context.Background(), fleetController, &v1alpha1.FleetPreview{
			Spec: v1alpha1.FleetPreviewSpec{CompositeController: spec, Limit: limit, Continue: next},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("preview (page %d): %v", len(pages)+1, err)
		}
		pages = append(pages, page)
		if next = page.Status.Continue; next == "" {
			return pages
		}
		if len(pages) > fleetParents+1 {
			t.Fatalf("more pages than parents: the continue token does not move on (%q)", next)
		}
	}
}

// byParent is the parents of pages by namespace/name; a parent in two
// pages fails the test.
func byParent(t *testing.T, pages []*v1alpha1.FleetPreview) map[string]v1alpha1.FleetPreviewParent {
	t.Helper()
	out := map[string]v1alpha1.FleetPreviewParent{}
	for _, page := range pages {
		for _, p := range page.Status.Parents {
			key := p.Namespace + "/" + p.Name
			if _, dup := out[key]; dup {
				t.Errorf("parent %s is in two pages", key)
			}
			out[key] = p
		}
	}
	return out
}

// resourceVersions are those of the fleet's controller, parents,
// ConfigMaps, Secrets and ControllerRevisions: what a preview must not
// change.
func (f *fleetFixture) resourceVersions(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	stored, err := f.cc.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, fleetController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["compositecontroller/"+stored.Name] = stored.ResourceVersion
	opts := metav1.ListOptions{}
	for _, ns := range fleetNamespaces {
		for kind, list := range map[string]func() (runtime.Object, error){
			"hello":     func() (runtime.Object, error) { return f.dyn.Resource(hellosGVR).Namespace(ns).List(ctx, opts) },
			"configmap": func() (runtime.Object, error) { return suite.Kube.CoreV1().ConfigMaps(ns).List(ctx, opts) },
			"secret":    func() (runtime.Object, error) { return suite.Kube.CoreV1().Secrets(ns).List(ctx, opts) },
			"controllerrevision": func() (runtime.Object, error) {
				return f.cc.MetacontrollerV1alpha1().ControllerRevisions(ns).List(ctx, opts)
			},
		} {
			l, err := list()
			if err != nil {
				t.Fatal(err)
			}
			objs, err := meta.ExtractList(l)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				m, err := meta.Accessor(o)
				if err != nil {
					t.Fatal(err)
				}
				out[kind+"/"+ns+"/"+m.GetName()] = m.GetResourceVersion()
			}
		}
	}
	return out
}

// TestFleetPreviewNamesTheParentsAndFieldsAProposalChanges: a proposal
// that adds a child type (Secrets) and moves the sync hook to a URL that
// changes one field of the ConfigMap of a third of the parents previews,
// for each of the 50 parents, exactly that: a Secret to create, and for
// the gold third the one changed field; and nothing is written.
func TestFleetPreviewNamesTheParentsAndFieldsAProposalChanges(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	before := f.resourceVersions(t)
	spec := f.proposal(t, "proposed", func(s *v1alpha1.CompositeControllerSpec) {
		s.ChildResources = append(s.ChildResources, v1alpha1.CompositeControllerChildResourceRule{
			ResourceRule:   v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"},
			UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace},
		})
	})
	pages := previewAll(t, f.cc, spec, 0)
	if len(pages) != 1 {
		t.Errorf("50 parents took %d pages at the default limit, want 1", len(pages))
	}
	got := byParent(t, pages)
	if len(got) != fleetParents {
		t.Fatalf("previewed %d parents, want %d: %v", len(got), fleetParents, keysOfParents(got))
	}
	for key := range f.parents {
		p, ok := got[key]
		if !ok {
			t.Errorf("parent %s is not in the preview", key)
			continue
		}
		name := strings.TrimPrefix(key, p.Namespace+"/")
		want := []string{"Create Secret " + name + "-token"}
		wantCounts := v1alpha1.FleetPreviewCounts{Create: 1, Unchanged: 1}
		if f.gold[key] {
			want = append(want, "Update ConfigMap "+name+"-cm: data.color: \"blue\" -> \"teal\"")
			wantCounts = v1alpha1.FleetPreviewCounts{Create: 1, Update: 1}
		}
		var changes []string
		for _, c := range p.Changes {
			line := string(c.Action) + " " + c.Kind + " " + c.Name
			if c.Action == v1alpha1.SyncActionUpdate {
				line += ": " + strings.Join(c.Diff, "; ")
			}
			changes = append(changes, line)
		}
		sort.Strings(changes)
		sort.Strings(want)
		if !reflect.DeepEqual(changes, want) || p.Counts != wantCounts || p.Error != "" {
			t.Errorf("parent %s: changes %q, counts %+v, error %q; want %q, %+v", key, changes, p.Counts, p.Error, want, wantCounts)
		}
		wantStatus := []string(nil)
		if f.gold[key] {
			wantStatus = []string{`status.color: "blue" -> "teal"`}
		}
		if !reflect.DeepEqual(p.StatusDiff, wantStatus) {
			t.Errorf("parent %s: status diff %q, want %q", key, p.StatusDiff, wantStatus)
		}
	}
	totals := pages[0].Status.Totals
	wantTotals := v1alpha1.FleetPreviewTotals{Parents: 50, Changed: 50, Counts: v1alpha1.FleetPreviewCounts{Create: 50, Update: 17, Unchanged: 33}}
	if totals != wantTotals {
		t.Errorf("totals %+v, want %+v", totals, wantTotals)
	}
	if after := f.resourceVersions(t); !reflect.DeepEqual(before, after) {
		t.Errorf("the preview wrote: resourceVersions before %v, after %v", before, after)
	}
}

// TestFleetPreviewShowsAFailingHookOnItsParentsOnly: a new hook
// deployment that fails for some parents shows as an error on each of
// those, and on no other, whose plans stay unchanged.
func TestFleetPreviewShowsAFailingHookOnItsParentsOnly(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	got := byParent(t, previewAll(t, f.cc, f.proposal(t, "failing", nil), 0))
	failed := 0
	for key := range f.parents {
		p := got[key]
		switch {
		case f.failing[key] && !strings.Contains(p.Error, "the new hook deployment breaks on "+p.Name):
			t.Errorf("parent %s: error %q, want the hook's failure", key, p.Error)
		case !f.failing[key] && (p.Error != "" || len(p.Changes) > 0 || p.Counts != v1alpha1.FleetPreviewCounts{Unchanged: 1}):
			t.Errorf("parent %s: error %q, changes %v, counts %+v; want none and one unchanged child", key, p.Error, p.Changes, p.Counts)
		}
		if p.Error != "" {
			failed++
		}
	}
	if failed != len(f.failing) {
		t.Errorf("%d parents failed, want %d", failed, len(f.failing))
	}
}

// TestFleetPreviewPagesEveryParentOnce: with a limit of 7, the pages hold
// every parent exactly once, in eight pages.
func TestFleetPreviewPagesEveryParentOnce(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	pages := previewAll(t, f.cc, nil, 7)
	got := byParent(t, pages)
	if len(got) != fleetParents || len(pages) != 8 {
		t.Errorf("%d pages with %d parents, want 8 with %d: %v", len(pages), len(got), fleetParents, keysOfParents(got))
	}
	for i, page := range pages {
		if n := len(page.Status.Parents); int32(n) != page.Status.Totals.Parents || (i < 7 && n != 7) {
			t.Errorf("page %d: %d parents, totals say %d", i+1, n, page.Status.Totals.Parents)
		}
	}
}

// TestFleetPreviewShowsOnlyTheCallersNamespaces: a caller who may list
// and manage hellos and their children in fleet-a only is previewed
// fleet-a's parents, and the answer says nothing of fleet-b's: no parent,
// no count, not its name.
func TestFleetPreviewShowsOnlyTheCallersNamespaces(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	ctx := context.Background()
	const user = "fleet-tenant"
	previewer := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-fleet-previewer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/preview"}, Verbs: []string{"create"}}},
	}
	author := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-fleet-author", Namespace: "fleet-a"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "delete", "list", "watch"}},
		},
	}
	if _, err := suite.Kube.RbacV1().ClusterRoles().Create(ctx, previewer, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := suite.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: previewer.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: previewer.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := suite.Kube.RbacV1().Roles(author.Namespace).Create(ctx, author, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := suite.Kube.RbacV1().RoleBindings(author.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: author.Name, Namespace: author.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: author.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// RBAC reaches kube-apiserver's authorizer through its informers, and
	// composite-apiserver keeps each answer for seconds: ask kube-apiserver
	// first, so that the server's first question gets the grant.
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Group: "metacontroller.k8s.io", Resource: "compositecontrollers", Subresource: "preview"},
		{Verb: "list", Group: "example.com", Resource: "hellos", Namespace: "fleet-a"},
		{Verb: "watch", Group: "", Resource: "configmaps", Namespace: "fleet-a"},
	} {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			review, err := suite.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs},
			}, metav1.CreateOptions{})
			return err == nil && review.Status.Allowed, nil
		})
		if err != nil {
			t.Fatalf("%s is not granted %+v: %v", user, attrs, err)
		}
	}
	tenant := clientAs(t, user)

	// Without create on compositecontrollers/preview, nothing.
	nobody := clientAs(t, "fleet-nobody")
	if _, err := nobody.MetacontrollerV1alpha1().CompositeControllers().Preview(ctx, fleetController, &v1alpha1.FleetPreview{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a user without create on compositecontrollers/preview: %v, want Forbidden", err)
	}

	// Small pages, so that paging per namespace is what is proven.
	pages := previewAll(t, tenant, nil, 10)
	got := byParent(t, pages)
	want := 0
	for key := range f.parents {
		if strings.HasPrefix(key, "fleet-a/") {
			want++
			if _, ok := got[key]; !ok {
				t.Errorf("parent %s of the caller's namespace is not in the preview", key)
			}
		}
	}
	if len(got) != want {
		t.Errorf("previewed %d parents, want fleet-a's %d: %v", len(got), want, keysOfParents(got))
	}
	for _, page := range pages {
		data, _ := json.Marshal(page)
		if strings.Contains(string(data), "fleet-b") {
			t.Errorf("the answer names the namespace the caller may not read:\n%s", data)
		}
	}

	// Secrets in fleet-a they may not manage: a proposal that adds them
	// is previewed as an error on each of fleet-a's parents, naming what
	// is missing, as creating the controller would be refused; fleet-b's
	// parents are still not there.
	withSecrets := f.proposal(t, "proposed", func(s *v1alpha1.CompositeControllerSpec) {
		s.ChildResources = append(s.ChildResources, v1alpha1.CompositeControllerChildResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"}})
	})
	refused := byParent(t, previewAll(t, tenant, withSecrets, 0))
	if len(refused) != want {
		t.Errorf("previewed %d parents, want fleet-a's %d: %v", len(refused), want, keysOfParents(refused))
	}
	for key, p := range refused {
		if !strings.Contains(p.Error, "you may not") || !strings.Contains(p.Error, "create secrets") || len(p.Changes) > 0 {
			t.Errorf("parent %s: error %q, changes %v; want the missing rights on Secrets and no plan", key, p.Error, p.Changes)
		}
	}
}

// clientAs is a clientset of user, authenticated by a client certificate.
func clientAs(t *testing.T, user string) clientset.Interface {
	t.Helper()
	kubeconfig, err := suite.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func keysOfParents(m map[string]v1alpha1.FleetPreviewParent) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestFleetPreviewRefusesAnInvalidProposal: a proposal is validated as an
// update of the controller would be, and the error names the field where
// the request holds it; nothing is previewed.
func TestFleetPreviewRefusesAnInvalidProposal(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	bad := f.proposal(t, "proposed", func(s *v1alpha1.CompositeControllerSpec) {
		url := "not a url"
		s.Hooks.Sync.Webhook.URL = &url
	})
	_, err := f.cc.MetacontrollerV1alpha1().CompositeControllers().Preview(context.Background(), fleetController, &v1alpha1.FleetPreview{
		Spec: v1alpha1.FleetPreviewSpec{CompositeController: bad, Limit: -1},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("an invalid proposal: %v, want Invalid", err)
	}
	var fields []string
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	sort.Strings(fields)
	if want := []string{"spec.compositeController.hooks.sync.webhook.url", "spec.limit"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %q, want %q (%v)", fields, want, err)
	}
}

// TestFleetPreviewPagesEndWithinTheRequestsDeadline: with hooks slower
// than a request's deadline allows for all its parents (8 s, the timeout
// the client asks for, against 3 s a parent, 16 at a time), a page answers
// in time with the parents previewed so far and a continue token, and the
// pages together hold every parent once.
func TestFleetPreviewPagesEndWithinTheRequestsDeadline(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	spec := f.proposal(t, "slow", nil)
	client := f.cc.MetacontrollerV1alpha1().RESTClient()
	var pages []*v1alpha1.FleetPreview
	next := ""
	for len(pages) <= fleetParents {
		page := &v1alpha1.FleetPreview{}
		err := client.Post().Resource("compositecontrollers").Name(fleetController).SubResource("preview").Timeout(8 * time.Second).
			Body(&v1alpha1.FleetPreview{Spec: v1alpha1.FleetPreviewSpec{CompositeController: spec, Limit: fleetParents, Continue: next}}).
			Do(context.Background()).Into(page)
		if err != nil {
			t.Fatalf("page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, page)
		if next = page.Status.Continue; next == "" {
			break
		}
	}
	if n := len(pages[0].Status.Parents); n == fleetParents || pages[0].Status.Continue == "" {
		t.Errorf("the first page holds %d of %d parents (continue %q): 3 s hooks for all of them, 16 at a time, do not fit in 8 s", n, fleetParents, pages[0].Status.Continue)
	}
	got := byParent(t, pages)
	if len(got) != fleetParents {
		t.Errorf("%d pages hold %d parents, want %d", len(pages), len(got), fleetParents)
	}
	for key, p := range got {
		if p.Error != "" || len(p.Changes) > 0 {
			t.Errorf("parent %s: error %q, changes %v; the slow hook answers as the current one", key, p.Error, p.Changes)
		}
	}
}
