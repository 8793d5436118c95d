package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/apicheck"
)

func ptr[T any](v T) *T { return &v }

// testCAPEM is a real self-signed CA certificate, generated once per test
// binary, so that inline CA bundles are checked the way they are in use.
var testCAPEM = sync.OnceValue(func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
})

// validCompositeController returns an object that passes validation and
// draws no warnings, using most optional fields so that each test case can
// break exactly one thing.
func validCompositeController() *metacontroller.CompositeController {
	return &metacontroller.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "foo-controller", ResourceVersion: "1"},
		Spec: metacontroller.CompositeControllerSpec{
			ParentResource: metacontroller.CompositeControllerParentResourceRule{
				ResourceRule: metacontroller.ResourceRule{APIVersion: "ctl.example.com/v1", Resource: "foos"},
				RevisionHistory: &metacontroller.CompositeControllerRevisionHistory{
					FieldPaths: []string{"spec.template"},
				},
				LabelSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"app": "foo"},
					MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
					},
				},
				IgnoreStatusChanges: ptr(true),
			},
			ChildResources: []metacontroller.CompositeControllerChildResourceRule{{
				ResourceRule: metacontroller.ResourceRule{APIVersion: "apps/v1", Resource: "deployments"},
				UpdateStrategy: &metacontroller.CompositeControllerChildUpdateStrategy{
					Method: metacontroller.ChildUpdateInPlace,
				},
			}},
			Hooks: &metacontroller.CompositeControllerHooks{
				Sync: &metacontroller.Hook{
					Version: ptr(metacontroller.HookVersionV2),
					Webhook: &metacontroller.Webhook{
						URL:                    ptr("https://hooks.example.com/sync"),
						Timeout:                &metav1.Duration{Duration: 10 * time.Second},
						ResponseUnMarshallMode: ptr(metacontroller.ResponseUnmarshallModeStrict),
						Etag: &metacontroller.WebhookEtagConfig{
							Enabled:             ptr(true),
							CacheTimeoutSeconds: ptr[int32](60),
							CacheCleanupSeconds: ptr[int32](300),
						},
						CABundle: &metacontroller.CABundleConfig{Inline: ptr(testCAPEM())},
						Authorization: &metacontroller.AuthorizationConfig{
							Type:      "Bearer",
							SecretRef: metacontroller.KeyReference{Name: "hook-token", Namespace: "hooks", Key: "token"},
						},
					},
				},
				Customize: &metacontroller.Hook{
					Version: ptr(metacontroller.HookVersionV1),
					Webhook: &metacontroller.Webhook{
						Service: &metacontroller.ServiceReference{
							Name:      "foo-hooks",
							Namespace: "hooks",
							Port:      ptr[int32](8443),
							Protocol:  ptr("https"),
						},
						Path:                   ptr("/customize"),
						ResponseUnMarshallMode: ptr(metacontroller.ResponseUnmarshallModeLoose),
						CABundle: &metacontroller.CABundleConfig{
							SecretRef: &metacontroller.KeyReference{Name: "hooks-ca", Namespace: "hooks", Key: "ca.crt"},
						},
						ClientTLS: &metacontroller.ClientTLSConfig{
							SecretRef:     metacontroller.SecretReference{Name: "hooks-client", Namespace: "hooks"},
							CertKey:       "tls.crt",
							PrivateKeyKey: "tls.key",
						},
					},
				},
				Finalize: &metacontroller.Hook{
					Webhook: &metacontroller.Webhook{
						Service: &metacontroller.ServiceReference{
							Name:      "foo-hooks",
							Namespace: "hooks",
							Protocol:  ptr("https"),
						},
						Path: ptr("/finalize"),
						BasicAuth: &metacontroller.BasicAuthConfig{
							SecretRef:   metacontroller.SecretReference{Name: "hooks-basic", Namespace: "hooks"},
							UsernameKey: "username",
							PasswordKey: "password",
						},
					},
				},
				Patches: []metacontroller.PatchHook{
					{
						Name:      "sidecar",
						EnabledIf: ptr(`has(builtin.parent.spec.sidecar) && builtin.controller.generation > 0`),
						Webhook: &metacontroller.Webhook{
							URL:                    ptr("https://hooks.example.com/patch"),
							ResponseUnMarshallMode: ptr(metacontroller.ResponseUnmarshallModeStrict),
						},
					},
					{
						Name: "labels",
						Definitions: []metacontroller.PatchDefinition{{
							Selector: metacontroller.PatchSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
							JSONPatches: []metacontroller.JSONPatch{
								{Op: metacontroller.JSONPatchOpAdd, Path: "/metadata/labels/team", Value: &metacontroller.JSON{Raw: []byte(`"blue"`)}},
								{Op: metacontroller.JSONPatchOpReplace, Path: "/spec/replicas", ValueFrom: &metacontroller.JSONPatchValue{Variable: ptr("builtin.parent.spec.replicas")}},
								{Op: metacontroller.JSONPatchOpAdd, Path: "/spec/template/spec/containers/-", ValueFrom: &metacontroller.JSONPatchValue{
									Template: ptr(`{name: log, image: "{{ .builtin.parent.spec.logImage }}", args: ["{{ .builtin.child.name }}"]}`),
								}},
								{Op: metacontroller.JSONPatchOpRemove, Path: "/metadata/annotations/a~1b"},
							},
						}},
					},
				},
			},
			EndpointConfigs: []metacontroller.EndpointConfig{{
				Host: "hooks.example.com:8443",
				CABundle: &metacontroller.CABundleConfig{
					ConfigMapRef: &metacontroller.KeyReference{Name: "hooks-ca", Namespace: "hooks"},
				},
				BasicAuth: &metacontroller.BasicAuthConfig{
					SecretRef: metacontroller.SecretReference{Name: "hooks-basic", Namespace: "hooks"},
				},
			}},
			ResyncPeriodSeconds: ptr[int32](60),
			GenerateSelector:    ptr(true),
		},
	}
}

// wantErr is an expected error, identified by its full field path and type.
type wantErr struct {
	path string
	typ  field.ErrorType
}

func (w wantErr) String() string { return string(w.typ) + " " + w.path }

// assertErrors fails unless errs holds exactly the expected errors (by path
// and type; several errors of one path and type count once), so that a
// case also catches errors reported at a wrong or additional path.
func assertErrors(t *testing.T, errs field.ErrorList, want []wantErr) {
	t.Helper()
	got := map[wantErr]bool{}
	for _, e := range errs {
		got[wantErr{e.Field, e.Type}] = true
	}
	wantSet := map[wantErr]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	var missing, unexpected []string
	for w := range wantSet {
		if !got[w] {
			missing = append(missing, w.String())
		}
	}
	for g := range got {
		if !wantSet[g] {
			unexpected = append(unexpected, g.String())
		}
	}
	sort.Strings(missing)
	sort.Strings(unexpected)
	if len(missing) > 0 || len(unexpected) > 0 {
		t.Errorf("missing errors %v, unexpected errors %v; all errors:\n%s", missing, unexpected, errs.ToAggregate())
	}
}

func inv(path string) wantErr  { return wantErr{path, field.ErrorTypeInvalid} }
func req(path string) wantErr  { return wantErr{path, field.ErrorTypeRequired} }
func dup(path string) wantErr  { return wantErr{path, field.ErrorTypeDuplicate} }
func forb(path string) wantErr { return wantErr{path, field.ErrorTypeForbidden} }
func nsup(path string) wantErr { return wantErr{path, field.ErrorTypeNotSupported} }

const (
	syncWebhook      = "spec.hooks.sync.webhook"
	customizeWebhook = "spec.hooks.customize.webhook"
	finalizeWebhook  = "spec.hooks.finalize.webhook"
)

func syncWH(cc *metacontroller.CompositeController) *metacontroller.Webhook {
	return cc.Spec.Hooks.Sync.Webhook
}

func customizeWH(cc *metacontroller.CompositeController) *metacontroller.Webhook {
	return cc.Spec.Hooks.Customize.Webhook
}

// malformedHosts are endpointConfig hosts that no hook URL's host can be.
var malformedHosts = []string{
	"https://hooks.example.com", // a scheme
	"hooks.example.com/sync",    // a path
	"hooks.example.com:99999",   // a port out of range
	"hooks.example.com:https",   // a port that is not a number
	"hooks.example.com:",        // an empty port
	"hooks_example.com",         // not a DNS name
	"fd00::1",                   // an IPv6 address without brackets
}

func TestValidateCompositeController(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(cc *metacontroller.CompositeController)
		want   []wantErr
		// mustNotMention is text that must appear in no error, e.g. a
		// secret that was part of the rejected value.
		mustNotMention string
	}{
		{
			name:   "valid object has no errors",
			mutate: func(cc *metacontroller.CompositeController) {},
		},
		{
			name: "minimal object with only parent and sync url is valid",
			mutate: func(cc *metacontroller.CompositeController) {
				*cc = metacontroller.CompositeController{
					ObjectMeta: metav1.ObjectMeta{Name: "minimal"},
					Spec: metacontroller.CompositeControllerSpec{
						ParentResource: metacontroller.CompositeControllerParentResourceRule{
							ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
						},
						Hooks: &metacontroller.CompositeControllerHooks{
							Sync: &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("http://hook.default/sync")}},
						},
					},
				}
			},
		},

		// metadata
		{
			name:   "namespace is forbidden on a cluster-scoped object",
			mutate: func(cc *metacontroller.CompositeController) { cc.Namespace = "default" },
			want:   []wantErr{forb("metadata.namespace")},
		},
		{
			name:   "name is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Name = "" },
			want:   []wantErr{req("metadata.name")},
		},
		{
			name:   "name must be a valid path segment",
			mutate: func(cc *metacontroller.CompositeController) { cc.Name = "foo/bar" },
			want:   []wantErr{inv("metadata.name")},
		},

		// parentResource
		{
			name:   "parent apiVersion is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.APIVersion = "" },
			want:   []wantErr{req("spec.parentResource.apiVersion")},
		},
		{
			name: "parent apiVersion with two slashes does not parse",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.APIVersion = "ctl.example.com/v1/foo"
			},
			want: []wantErr{inv("spec.parentResource.apiVersion")},
		},
		{
			name:   "parent apiVersion needs a version",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.APIVersion = "ctl.example.com/" },
			want:   []wantErr{inv("spec.parentResource.apiVersion")},
		},
		{
			name:   "parent apiVersion group must be a DNS subdomain",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.APIVersion = "ctl_example.com/v1" },
			want:   []wantErr{inv("spec.parentResource.apiVersion")},
		},
		{
			name:   "parent apiVersion version must be lower case",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.APIVersion = "ctl.example.com/V1" },
			want:   []wantErr{inv("spec.parentResource.apiVersion")},
		},
		{
			name:   "parent core group apiVersion without group is valid",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.APIVersion = "v1" },
		},
		{
			name:   "parent resource is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.Resource = "" },
			want:   []wantErr{req("spec.parentResource.resource")},
		},
		{
			name:   "parent resource may not name a subresource",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.Resource = "foos/status" },
			want:   []wantErr{inv("spec.parentResource.resource")},
		},
		{
			name:   "parent resource must be lower case",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ParentResource.Resource = "Foos" },
			want:   []wantErr{inv("spec.parentResource.resource")},
		},
		{
			name: "parent labelSelector operator must be known",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.LabelSelector.MatchExpressions[0].Operator = "Like"
			},
			want: []wantErr{inv("spec.parentResource.labelSelector.matchExpressions[0].operator")},
		},
		{
			name: "parent labelSelector label value must be valid",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.LabelSelector.MatchLabels = map[string]string{"app": "not a value"}
			},
			want: []wantErr{inv("spec.parentResource.labelSelector.matchLabels")},
		},
		{
			// Metacontroller accepts it; see TestWarnings.
			name: "parent revisionHistory empty fieldPath is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.RevisionHistory.FieldPaths = []string{"spec.template", ""}
			},
		},

		// childResources
		{
			name:   "child apiVersion is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ChildResources[0].APIVersion = "" },
			want:   []wantErr{req("spec.childResources[0].apiVersion")},
		},
		{
			name:   "child apiVersion must parse",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ChildResources[0].APIVersion = "apps/v1/x" },
			want:   []wantErr{inv("spec.childResources[0].apiVersion")},
		},
		{
			name:   "child resource is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ChildResources[0].Resource = "" },
			want:   []wantErr{req("spec.childResources[0].resource")},
		},
		{
			name:   "child resource may not name a subresource",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ChildResources[0].Resource = "deployments/scale" },
			want:   []wantErr{inv("spec.childResources[0].resource")},
		},
		{
			// Metacontroller accepts duplicates; see TestWarnings.
			name: "child resources listed twice are accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources, cc.Spec.ChildResources[0])
			},
		},
		{
			name: "same resource in different versions are different children",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "apps/v1beta1", Resource: "deployments"}})
			},
		},
		{
			name: "children of this server's own group are refused: they would be written in its name",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "metacontroller.k8s.io/v1alpha1", Resource: "compositecontrollers"}})
			},
			want: []wantErr{{"spec.childResources[1].apiVersion", field.ErrorTypeForbidden}},
		},
		{
			// Metacontroller accepts it; see TestWarnings.
			name: "child equal to the parent is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: cc.Spec.ParentResource.ResourceRule})
			},
		},
		{
			name: "child updateStrategy method must be supported",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.Method = "Rolling"
			},
			want: []wantErr{nsup("spec.childResources[0].updateStrategy.method")},
		},
		{
			name: "child updateStrategy method may be empty",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.Method = ""
			},
		},
		{
			name: "child updateStrategy may be unset",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy = nil
			},
		},
		{
			// Metacontroller accepts them with every method; see TestWarnings.
			name: "status checks are accepted with a non-rolling method",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions = []metacontroller.StatusConditionCheck{{Type: "Ready"}}
			},
		},
		{
			name: "status checks are allowed with RollingRecreate and RollingInPlace",
			mutate: func(cc *metacontroller.CompositeController) {
				checks := metacontroller.ChildUpdateStatusChecks{Conditions: []metacontroller.StatusConditionCheck{{Type: "Ready", Status: ptr("True")}}}
				cc.Spec.ChildResources[0].UpdateStrategy.Method = metacontroller.ChildUpdateRollingRecreate
				cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks = checks
				cc.Spec.ChildResources = append(cc.Spec.ChildResources, metacontroller.CompositeControllerChildResourceRule{
					ResourceRule:   metacontroller.ResourceRule{APIVersion: "apps/v1", Resource: "statefulsets"},
					UpdateStrategy: &metacontroller.CompositeControllerChildUpdateStrategy{Method: metacontroller.ChildUpdateRollingInPlace, StatusChecks: checks},
				})
			},
		},
		{
			name: "status check condition type is required",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.Method = metacontroller.ChildUpdateRollingInPlace
				cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions = []metacontroller.StatusConditionCheck{{Type: "Ready"}, {Status: ptr("True")}}
			},
			want: []wantErr{req("spec.childResources[0].updateStrategy.statusChecks.conditions[1].type")},
		},

		// hooks
		{
			name:   "hooks are required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks = nil },
			want:   []wantErr{req("spec.hooks")},
		},
		{
			name:   "sync hook is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Sync = nil },
			want:   []wantErr{req("spec.hooks.sync")},
		},
		{
			name: "sync hook version must be v1 or v2",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Sync.Version = ptr[metacontroller.HookVersion]("v3")
			},
			want: []wantErr{nsup("spec.hooks.sync.version")},
		},
		{
			name: "customize hook version must be v1 or v2",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Customize.Version = ptr[metacontroller.HookVersion]("V1")
			},
			want: []wantErr{nsup("spec.hooks.customize.version")},
		},
		{
			// Metacontroller treats it as unset; see TestWarnings.
			name:   "finalize hook without a webhook is accepted",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Finalize.Webhook = nil },
		},
		{
			name: "preUpdateChild and postUpdateChild are accepted, whatever their webhook",
			mutate: func(cc *metacontroller.CompositeController) {
				// Never called, so nothing about the webhook can fail.
				cc.Spec.Hooks.PreUpdateChild = &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("ftp://pre update")}}
				cc.Spec.Hooks.PostUpdateChild = &metacontroller.Hook{}
			},
		},
		{
			name: "preUpdateChild and postUpdateChild enums are checked as by Metacontroller's CRD",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.PreUpdateChild = &metacontroller.Hook{Version: ptr[metacontroller.HookVersion]("v3")}
				cc.Spec.Hooks.PostUpdateChild = &metacontroller.Hook{Webhook: &metacontroller.Webhook{
					ResponseUnMarshallMode: ptr[metacontroller.ResponseUnmarshallMode]("lenient"),
				}}
			},
			want: []wantErr{
				nsup("spec.hooks.preUpdateChild.version"),
				nsup("spec.hooks.postUpdateChild.webhook.responseUnMarshallMode"),
			},
		},
		{
			name:   "sync hook needs a webhook",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Sync.Webhook = nil },
			want:   []wantErr{req(syncWebhook)},
		},

		// webhook address
		{
			name:   "webhook needs url or service",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = nil },
			want:   []wantErr{req(syncWebhook)},
		},
		{
			// url wins, as in Metacontroller; see TestWarnings.
			name: "webhook with both url and service is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Service = &metacontroller.ServiceReference{Name: "foo-hooks", Namespace: "hooks"}
			},
		},
		{
			name: "service is not checked when url is set",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Service = &metacontroller.ServiceReference{Name: "Not A Name", Port: ptr[int32](0)}
				syncWH(cc).Path = ptr("no-slash")
			},
		},
		{
			name:   "webhook url may not be empty",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("") },
			want:   []wantErr{req(syncWebhook + ".url")},
		},
		{
			name:   "webhook url must parse",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("https://hooks example.com/sync") },
			want:   []wantErr{inv(syncWebhook + ".url")},
		},
		{
			name:   "webhook url must be absolute",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("hooks.example.com/sync") },
			want:   []wantErr{inv(syncWebhook + ".url")},
		},
		{
			name:   "webhook url scheme must be http or https",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("ftp://hooks.example.com/sync") },
			want:   []wantErr{inv(syncWebhook + ".url")},
		},
		{
			name:   "webhook url must have a host",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("https:///sync") },
			want:   []wantErr{inv(syncWebhook + ".url")},
		},
		{
			// Go's HTTP client sends them as basic credentials, for
			// Metacontroller as here; see TestWarnings.
			name: "webhook url with user info is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://admin:s3cr3t@hooks.example.com/sync")
			},
		},
		{
			name: "webhook url errors do not echo user info",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("ftp://ghp_token123@hooks.example.com/sync")
			},
			want:           []wantErr{inv(syncWebhook + ".url")},
			mustNotMention: "ghp_token123",
		},
		{
			name: "webhook url with a query is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com/sync?apiKey=k3y&hook=sync")
			},
		},
		{
			name:   "webhook url with an empty query is accepted",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("https://hooks.example.com/sync?") },
		},
		{
			name: "webhook url errors do not echo query values",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https:///sync?apiKey=k3y")
			},
			want:           []wantErr{inv(syncWebhook + ".url")},
			mustNotMention: "k3y",
		},
		{
			// HTTP clients drop it; see TestWarnings.
			name: "webhook url with a fragment is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com/sync#top")
			},
		},
		{
			name: "webhook url with a port is valid",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com:8443/sync")
			},
		},
		{
			name:   "webhook path must start with a slash",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Path = ptr("customize") },
			want:   []wantErr{inv(customizeWebhook + ".path")},
		},
		{
			name:   "webhook path may be empty",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Path = ptr("") },
		},
		{
			name:   "webhook path alongside url is accepted",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Path = ptr("/ignored") },
		},
		{
			name:   "webhook service name must be a DNS label",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Name = "foo.hooks" },
			want:   []wantErr{inv(customizeWebhook + ".service.name")},
		},
		{
			name:   "webhook service name is required",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Name = "" },
			want:   []wantErr{req(customizeWebhook + ".service.name")},
		},
		{
			name:   "webhook service namespace is required",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Namespace = "" },
			want:   []wantErr{req(customizeWebhook + ".service.namespace")},
		},
		{
			name:   "webhook service namespace must be a DNS label",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Namespace = "Hooks" },
			want:   []wantErr{inv(customizeWebhook + ".service.namespace")},
		},
		{
			name:   "webhook service port may not be 0",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Port = ptr[int32](0) },
			want:   []wantErr{inv(customizeWebhook + ".service.port")},
		},
		{
			name:   "webhook service port may not exceed 65535",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Port = ptr[int32](65536) },
			want:   []wantErr{inv(customizeWebhook + ".service.port")},
		},
		{
			name:   "webhook service protocol must be http or https",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Protocol = ptr("grpc") },
			want:   []wantErr{nsup(customizeWebhook + ".service.protocol")},
		},
		{
			name:   "webhook service protocol is case-insensitive, as URL schemes are",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).Service.Protocol = ptr("HTTPS") },
		},

		// webhook call settings
		{
			// Metacontroller uses its default instead; see TestWarnings.
			name:   "webhook timeout of zero is accepted",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Timeout = &metav1.Duration{} },
		},
		{
			name: "webhook timeout that is negative is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: -time.Second}
			},
		},
		{
			// Used as given, as in Metacontroller; see TestWarnings.
			name: "webhook timeout over 30s is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: 45 * time.Second}
			},
		},
		{
			name: "webhook responseUnMarshallMode must be loose or strict",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).ResponseUnMarshallMode = ptr[metacontroller.ResponseUnmarshallMode]("lenient")
			},
			want: []wantErr{nsup(syncWebhook + ".responseUnMarshallMode")},
		},
		{
			// Means "never", as 0 does; see TestWarnings.
			name: "webhook etag negative seconds are accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Etag.CacheTimeoutSeconds = ptr[int32](-1)
				syncWH(cc).Etag.CacheCleanupSeconds = ptr[int32](-1)
			},
		},

		// caBundle
		{
			name:   "caBundle needs a source",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).CABundle = &metacontroller.CABundleConfig{} },
			want:   []wantErr{req(syncWebhook + ".caBundle")},
		},
		{
			name: "caBundle may have only one source",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.SecretRef = &metacontroller.KeyReference{Name: "hooks-ca", Namespace: "hooks"}
			},
			want: []wantErr{inv(syncWebhook + ".caBundle")},
		},
		{
			name:   "caBundle inline must contain PEM",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).CABundle.Inline = ptr("not a certificate") },
			want:   []wantErr{inv(syncWebhook + ".caBundle.inline")},
		},
		{
			name: "caBundle inline needs a certificate that parses",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.Inline = ptr(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})))
			},
			want: []wantErr{inv(syncWebhook + ".caBundle.inline")},
		},
		{
			// The bad one is skipped, as AppendCertsFromPEM does; see
			// TestWarnings.
			name: "caBundle inline with a certificate that does not parse beside one that does is accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.Inline = ptr(testCAPEM() + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})))
			},
		},
		{
			name: "caBundle inline without a CERTIFICATE block is invalid",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.Inline = ptr(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("x")})))
			},
			want: []wantErr{inv(syncWebhook + ".caBundle.inline")},
		},
		{
			name: "caBundle inline with several certificates is valid",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.Inline = ptr(testCAPEM() + testCAPEM())
			},
		},
		{
			name:   "caBundle secretRef name is required",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).CABundle.SecretRef.Name = "" },
			want:   []wantErr{req(customizeWebhook + ".caBundle.secretRef.name")},
		},
		{
			name:   "caBundle secretRef name must be a DNS subdomain",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).CABundle.SecretRef.Name = "Hooks_CA" },
			want:   []wantErr{inv(customizeWebhook + ".caBundle.secretRef.name")},
		},
		{
			name: "caBundle secretRef namespace must be a DNS label",
			mutate: func(cc *metacontroller.CompositeController) {
				customizeWH(cc).CABundle.SecretRef.Namespace = "hooks.ns"
			},
			want: []wantErr{inv(customizeWebhook + ".caBundle.secretRef.namespace")},
		},
		{
			name:   "caBundle secretRef key must be a valid data key",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).CABundle.SecretRef.Key = "ca/crt" },
			want:   []wantErr{inv(customizeWebhook + ".caBundle.secretRef.key")},
		},
		{
			name: "caBundle configMapRef namespace is required",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].CABundle.ConfigMapRef.Namespace = ""
			},
			want: []wantErr{req("spec.endpointConfigs[0].caBundle.configMapRef.namespace")},
		},

		// authentication
		{
			name: "authorization and basicAuth are mutually exclusive on a webhook",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).BasicAuth = &metacontroller.BasicAuthConfig{SecretRef: metacontroller.SecretReference{Name: "b", Namespace: "hooks"}}
			},
			want: []wantErr{forb(syncWebhook + ".basicAuth")},
		},
		{
			name: "authorization and basicAuth are mutually exclusive on an endpointConfig",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].Authorization = &metacontroller.AuthorizationConfig{
					SecretRef: metacontroller.KeyReference{Name: "t", Namespace: "hooks", Key: "token"},
				}
			},
			want: []wantErr{forb("spec.endpointConfigs[0].basicAuth")},
		},
		{
			name:   "authorization type may not be Basic in any case",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Authorization.Type = "bAsIc" },
			want:   []wantErr{inv(syncWebhook + ".authorization.type")},
		},
		{
			name:   "authorization type must be a single token",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Authorization.Type = "Bearer abc" },
			want:   []wantErr{inv(syncWebhook + ".authorization.type")},
		},
		{
			name:   "authorization type may be empty",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Authorization.Type = "" },
		},
		{
			// Trimmed when the header is built, here as in Metacontroller.
			name:   "authorization type may have surrounding spaces",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Authorization.Type = " Bearer " },
		},
		{
			name:   "authorization type Basic is refused even with surrounding spaces",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Authorization.Type = " basic" },
			want:   []wantErr{inv(syncWebhook + ".authorization.type")},
		},
		{
			name:   "authorization secretRef key is required",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Authorization.SecretRef.Key = "" },
			want:   []wantErr{req(syncWebhook + ".authorization.secretRef.key")},
		},
		{
			name: "authorization secretRef name and namespace are required",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Authorization.SecretRef.Name = ""
				syncWH(cc).Authorization.SecretRef.Namespace = ""
			},
			want: []wantErr{
				req(syncWebhook + ".authorization.secretRef.name"),
				req(syncWebhook + ".authorization.secretRef.namespace"),
			},
		},
		{
			name:   "clientTLS secretRef name is required",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).ClientTLS.SecretRef.Name = "" },
			want:   []wantErr{req(customizeWebhook + ".clientTLS.secretRef.name")},
		},
		{
			name:   "clientTLS secretRef namespace is required",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).ClientTLS.SecretRef.Namespace = "" },
			want:   []wantErr{req(customizeWebhook + ".clientTLS.secretRef.namespace")},
		},
		{
			name:   "clientTLS certKey must be a valid data key",
			mutate: func(cc *metacontroller.CompositeController) { customizeWH(cc).ClientTLS.CertKey = "tls crt" },
			want:   []wantErr{inv(customizeWebhook + ".clientTLS.certKey")},
		},
		{
			name: "basicAuth secretRef namespace is required",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Finalize.Webhook.BasicAuth.SecretRef.Namespace = ""
			},
			want: []wantErr{req(finalizeWebhook + ".basicAuth.secretRef.namespace")},
		},

		// endpointConfigs
		{
			name:   "endpointConfig host is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.EndpointConfigs[0].Host = "" },
			want:   []wantErr{req("spec.endpointConfigs[0].host")},
		},
		{
			// The first one wins, as in Metacontroller; see TestWarnings.
			name: "endpointConfig hosts listed twice are accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, metacontroller.EndpointConfig{Host: "Hooks.Example.COM:8443"})
			},
		},
		{
			name: "endpointConfig connection settings are checked",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].CABundle = &metacontroller.CABundleConfig{}
			},
			want: []wantErr{req("spec.endpointConfigs[0].caBundle")},
		},
		{
			// They match no hook, so Metacontroller ignores them; see
			// TestWarnings.
			name: "endpointConfig hosts that can match no hook are accepted",
			mutate: func(cc *metacontroller.CompositeController) {
				for _, h := range malformedHosts {
					cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, metacontroller.EndpointConfig{Host: h})
				}
			},
		},
		{
			name: "endpointConfig hosts may be names, IPs, bracketed IPv6, with or without ports",
			mutate: func(cc *metacontroller.CompositeController) {
				for _, h := range []string{"Hooks.Example.com", "10.0.0.1", "10.0.0.1:443", "[fd00::1]", "[fd00::1]:8443"} {
					cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, metacontroller.EndpointConfig{Host: h})
				}
			},
		},

		// resync
		{
			name:   "workers may not be zero",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Workers = ptr[int32](0) },
			want:   []wantErr{inv("spec.workers")},
		},
		{
			name:   "workers may not exceed the maximum",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Workers = ptr[int32](65) },
			want:   []wantErr{inv("spec.workers")},
		},
		{
			// Metacontroller clamps it to 1s; see TestWarnings.
			name:   "resyncPeriodSeconds may be negative",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](-1) },
		},
		{
			name:   "resyncPeriodSeconds may be zero",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](0) },
		},
		{
			name: "ownChildWrites is Sync or Ignore",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.OwnChildWrites = ptr(metacontroller.OwnChildWritesPolicy("Sometimes"))
			},
			want: []wantErr{nsup("spec.ownChildWrites")},
		},
		{
			name: "ownChildWrites may be Ignore",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.OwnChildWrites = ptr(metacontroller.OwnChildWritesIgnore)
			},
		},
		{
			name: "ownStatusWrites is Sync or Ignore",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.OwnStatusWrites = ptr(metacontroller.OwnStatusWritesPolicy("Never"))
			},
			want: []wantErr{nsup("spec.ownStatusWrites")},
		},
		{
			name: "ownStatusWrites may be Ignore",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.OwnStatusWrites = ptr(metacontroller.OwnStatusWritesIgnore)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc := validCompositeController()
			tc.mutate(cc)
			errs := ValidateCompositeController(cc, exprs)
			assertErrors(t, errs, tc.want)
			if tc.mustNotMention != "" && strings.Contains(errs.ToAggregate().Error(), tc.mustNotMention) {
				t.Errorf("errors mention %q: %v", tc.mustNotMention, errs.ToAggregate())
			}
		})
	}
}

const (
	webhookPatch = "spec.hooks.patches[0]"
	inlinePatch  = "spec.hooks.patches[1]"
	inlineOps    = inlinePatch + ".definitions[0].jsonPatches"
)

func inlineDefinition(cc *metacontroller.CompositeController) *metacontroller.PatchDefinition {
	return &cc.Spec.Hooks.Patches[1].Definitions[0]
}

func TestValidatePatches(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(cc *metacontroller.CompositeController)
		want   []wantErr
	}{
		{
			name:   "no patches is valid",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Patches = nil },
		},
		{
			name:   "name is required",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Patches[0].Name = "" },
			want:   []wantErr{req(webhookPatch + ".name")},
		},
		{
			name:   "name must be usable as a label value",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Patches[0].Name = "add labels" },
			want:   []wantErr{inv(webhookPatch + ".name")},
		},
		{
			name:   "names are unique",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Patches[1].Name = "sidecar" },
			want:   []wantErr{dup(inlinePatch + ".name")},
		},
		{
			name: "webhook and definitions together are forbidden",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[1].Webhook = &metacontroller.Webhook{URL: ptr("https://hooks.example.com/patch")}
			},
			want: []wantErr{forb(inlinePatch + ".definitions")},
		},
		{
			name:   "neither webhook nor definitions is an error",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Patches[0].Webhook = nil },
			want:   []wantErr{req(webhookPatch)},
		},
		{
			name: "empty definitions count as none",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[1].Definitions = []metacontroller.PatchDefinition{}
			},
			want: []wantErr{req(inlinePatch)},
		},
		{
			name: "the webhook is checked as every hook's",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].Webhook.URL = ptr("ftp://hooks.example.com/patch")
			},
			want: []wantErr{inv(webhookPatch + ".webhook.url")},
		},
		{
			name: "enabledIf must compile",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].EnabledIf = ptr("builtin.parent.spec.replicas >")
			},
			want: []wantErr{inv(webhookPatch + ".enabledIf")},
		},
		{
			name: "enabledIf may only use declared variables",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].EnabledIf = ptr("builtin.cluster.name == 'x'")
			},
			want: []wantErr{inv(webhookPatch + ".enabledIf")},
		},
		{
			name: "enabledIf has no builtin.child: it is evaluated per parent",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].EnabledIf = ptr("builtin.child.name == 'x'")
			},
			want: []wantErr{inv(webhookPatch + ".enabledIf")},
		},
		{
			name: "enabledIf is type checked",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].EnabledIf = ptr("builtin.controller.generation == 'one'")
			},
			want: []wantErr{inv(webhookPatch + ".enabledIf")},
		},
		{
			name: "enabledIf must be a bool",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].EnabledIf = ptr("builtin.parent.metadata.name")
			},
			want: []wantErr{inv(webhookPatch + ".enabledIf")},
		},
		{
			name:   "enabledIf may not be blank",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Patches[0].EnabledIf = ptr(" ") },
			want:   []wantErr{inv(webhookPatch + ".enabledIf")},
		},
		{
			name: "selector apiVersion and kind are required",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).Selector = metacontroller.PatchSelector{}
			},
			want: []wantErr{req(inlinePatch + ".definitions[0].selector.apiVersion"), req(inlinePatch + ".definitions[0].selector.kind")},
		},
		{
			name: "selector apiVersion, kind and name must be valid",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).Selector = metacontroller.PatchSelector{APIVersion: "apps/v1/x", Kind: "Deploy ment", Name: "a/b"}
			},
			want: []wantErr{
				inv(inlinePatch + ".definitions[0].selector.apiVersion"),
				inv(inlinePatch + ".definitions[0].selector.kind"),
				inv(inlinePatch + ".definitions[0].selector.name"),
			},
		},
		{
			name:   "jsonPatches are required",
			mutate: func(cc *metacontroller.CompositeController) { inlineDefinition(cc).JSONPatches = nil },
			want:   []wantErr{req(inlineOps)},
		},
		{
			name:   "op must be add, replace or remove",
			mutate: func(cc *metacontroller.CompositeController) { inlineDefinition(cc).JSONPatches[0].Op = "move" },
			want:   []wantErr{nsup(inlineOps + "[0].op")},
		},
		{
			name: "path must be a JSON pointer",
			mutate: func(cc *metacontroller.CompositeController) {
				ops := inlineDefinition(cc).JSONPatches
				ops[0].Path = "metadata/labels/team"
				ops[1].Path = "/spec/a~2b"
				ops[3].Path = "/metadata/annotations/-"
			},
			want: []wantErr{inv(inlineOps + "[0].path"), inv(inlineOps + "[1].path"), inv(inlineOps + "[3].path")},
		},
		{
			name:   "path is required",
			mutate: func(cc *metacontroller.CompositeController) { inlineDefinition(cc).JSONPatches[0].Path = "" },
			want:   []wantErr{req(inlineOps + "[0].path")},
		},
		{
			name: "path may not change the child's identity",
			mutate: func(cc *metacontroller.CompositeController) {
				ops := inlineDefinition(cc).JSONPatches
				ops[0].Path = "/metadata/name"
				ops[1].Path = "/kind"
				ops[3].Path = "/metadata"
			},
			want: []wantErr{forb(inlineOps + "[0].path"), forb(inlineOps + "[1].path"), forb(inlineOps + "[3].path")},
		},
		{
			name: "value and valueFrom together are forbidden",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[1].Value = &metacontroller.JSON{Raw: []byte(`3`)}
			},
			want: []wantErr{forb(inlineOps + "[1].valueFrom")},
		},
		{
			name: "add and replace need a value",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[0].Value = nil
				inlineDefinition(cc).JSONPatches[1].ValueFrom = nil
			},
			want: []wantErr{req(inlineOps + "[0].value"), req(inlineOps + "[1].value")},
		},
		{
			name: "remove takes no value",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[3].Value = &metacontroller.JSON{Raw: []byte(`"x"`)}
				inlineDefinition(cc).JSONPatches[3].ValueFrom = &metacontroller.JSONPatchValue{Variable: ptr("builtin.parent.metadata.name")}
			},
			want: []wantErr{forb(inlineOps + "[3].value"), forb(inlineOps + "[3].valueFrom")},
		},
		{
			name: "value must be JSON",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[0].Value.Raw = []byte(`{not json`)
			},
			want: []wantErr{inv(inlineOps + "[0].value")},
		},
		{
			name: "valueFrom needs exactly one of variable and template",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[1].ValueFrom.Template = ptr("{{ .builtin.parent.metadata.name }}")
				inlineDefinition(cc).JSONPatches[2].ValueFrom.Template = nil
			},
			want: []wantErr{forb(inlineOps + "[1].valueFrom.template"), req(inlineOps + "[2].valueFrom")},
		},
		{
			name: "variables must exist",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[1].ValueFrom.Variable = ptr("builtin.parent.status.replicas")
			},
			want: []wantErr{inv(inlineOps + "[1].valueFrom.variable")},
		},
		{
			name: "variables start with builtin",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[1].ValueFrom.Variable = ptr("parent.spec.replicas")
			},
			want: []wantErr{inv(inlineOps + "[1].valueFrom.variable")},
		},
		{
			name: "builtin.child exists for inline patches",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[1].ValueFrom.Variable = ptr("builtin.child.namespace")
			},
		},
		{
			name: "templates must parse",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[2].ValueFrom.Template = ptr("{{ .builtin.parent.metadata.name ")
			},
			want: []wantErr{inv(inlineOps + "[2].valueFrom.template")},
		},
		{
			name: "templates may only use declared variables",
			mutate: func(cc *metacontroller.CompositeController) {
				inlineDefinition(cc).JSONPatches[2].ValueFrom.Template = ptr("{{ .builtin.parent.metadata.uid }}")
			},
			want: []wantErr{inv(inlineOps + "[2].valueFrom.template")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc := validCompositeController()
			tc.mutate(cc)
			assertErrors(t, ValidateCompositeController(cc, exprs), tc.want)
		})
	}
}

func TestValidateCompositeControllerUpdate(t *testing.T) {
	tests := []struct {
		name      string
		mutateOld func(cc *metacontroller.CompositeController)
		mutateNew func(cc *metacontroller.CompositeController)
		want      []wantErr
	}{
		{
			name:      "unchanged valid object has no errors",
			mutateOld: func(cc *metacontroller.CompositeController) {},
			mutateNew: func(cc *metacontroller.CompositeController) {},
		},
		{
			name:      "spec may change",
			mutateOld: func(cc *metacontroller.CompositeController) {},
			mutateNew: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.APIVersion = "ctl.example.com/v2"
				cc.Spec.ChildResources[0].UpdateStrategy.Method = metacontroller.ChildUpdateRecreate
			},
		},
		{
			name:      "name is immutable",
			mutateOld: func(cc *metacontroller.CompositeController) {},
			mutateNew: func(cc *metacontroller.CompositeController) { cc.Name = "other" },
			want:      []wantErr{inv("metadata.name")},
		},
		{
			name:      "new spec is validated",
			mutateOld: func(cc *metacontroller.CompositeController) {},
			mutateNew: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Sync = nil },
			want:      []wantErr{req("spec.hooks.sync")},
		},
		{
			name:      "invalid old spec does not block fixing it",
			mutateOld: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks = nil },
			mutateNew: func(cc *metacontroller.CompositeController) {},
		},
		{
			name:      "new spec errors are reported at spec paths",
			mutateOld: func(cc *metacontroller.CompositeController) {},
			mutateNew: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("ftp://hooks.example.com") },
			want:      []wantErr{inv(syncWebhook + ".url")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			oldCC, newCC := validCompositeController(), validCompositeController()
			tc.mutateOld(oldCC)
			tc.mutateNew(newCC)
			assertErrors(t, ValidateCompositeControllerUpdate(newCC, oldCC, exprs), tc.want)
		})
	}
}

func TestValidateCompositeControllerStatusUpdate(t *testing.T) {
	ready := func() metav1.Condition {
		return metav1.Condition{
			Type:               metacontroller.ConditionReady,
			Status:             metav1.ConditionTrue,
			Reason:             "Running",
			LastTransitionTime: metav1.Now(),
		}
	}
	tests := []struct {
		name   string
		mutate func(cc *metacontroller.CompositeController)
		want   []wantErr
	}{
		{
			name: "valid status has no errors",
			mutate: func(cc *metacontroller.CompositeController) {
				reachable := ready()
				reachable.Type = metacontroller.ConditionHookReachable
				cc.Status = metacontroller.CompositeControllerStatus{
					ObservedGeneration: 3,
					Conditions:         []metav1.Condition{ready(), reachable},
					Parents:            2,
					Children:           5,
					LastSyncTime:       ptr(metav1.Now()),
				}
			},
		},
		{
			name: "condition reason is required",
			mutate: func(cc *metacontroller.CompositeController) {
				c := ready()
				c.Reason = ""
				cc.Status.Conditions = []metav1.Condition{c}
			},
			want: []wantErr{req("status.conditions[0].reason")},
		},
		{
			name: "condition status must be True, False or Unknown",
			mutate: func(cc *metacontroller.CompositeController) {
				c := ready()
				c.Status = "Yes"
				cc.Status.Conditions = []metav1.Condition{c}
			},
			want: []wantErr{nsup("status.conditions[0].status")},
		},
		{
			name: "condition types must be unique",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Status.Conditions = []metav1.Condition{ready(), ready()}
			},
			want: []wantErr{dup("status.conditions[1]")},
		},
		{
			name:   "observedGeneration may not be negative",
			mutate: func(cc *metacontroller.CompositeController) { cc.Status.ObservedGeneration = -1 },
			want:   []wantErr{inv("status.observedGeneration")},
		},
		{
			name:   "parents may not be negative",
			mutate: func(cc *metacontroller.CompositeController) { cc.Status.Parents = -1 },
			want:   []wantErr{inv("status.parents")},
		},
		{
			name:   "children may not be negative",
			mutate: func(cc *metacontroller.CompositeController) { cc.Status.Children = -1 },
			want:   []wantErr{inv("status.children")},
		},
		{
			name:   "spec is not validated on status update",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks = nil },
		},
		{
			name:   "name is immutable",
			mutate: func(cc *metacontroller.CompositeController) { cc.Name = "other" },
			want:   []wantErr{inv("metadata.name")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			oldCC, newCC := validCompositeController(), validCompositeController()
			tc.mutate(newCC)
			assertErrors(t, ValidateCompositeControllerStatusUpdate(newCC, oldCC), tc.want)
		})
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(cc *metacontroller.CompositeController)
		// want has one entry per expected warning: substrings that warning
		// must all contain, the field path first.
		want [][]string
		// mustNotMention is text that must appear in no warning.
		mustNotMention string
	}{
		{
			name: "a finalize hook with a name too long for its finalizer",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Name = strings.Repeat("n", 44)
				cc.Spec.Hooks.Finalize = &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("https://hooks.example.com/finalize")}}
			},
			want: [][]string{{"metadata.name: ", "metacontroller.io/compositecontroller-" + strings.Repeat("n", 44), "at most 43 characters"}},
		},
		{
			name: "a long name without a finalize hook needs no finalizer",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Name = strings.Repeat("n", 44)
				cc.Spec.Hooks.Finalize = nil
			},
		},
		{
			name:   "valid object has no warnings",
			mutate: func(cc *metacontroller.CompositeController) {},
		},

		// hooks Metacontroller declares but never calls
		{
			name: "preUpdateChild and postUpdateChild are never called",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.PreUpdateChild = &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("http://hooks.example.com/pre")}}
				cc.Spec.Hooks.PostUpdateChild = &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("http://hooks.example.com/post")}}
			},
			want: [][]string{
				{"spec.hooks.preUpdateChild: ", "never called", "neither does Metacontroller"},
				{"spec.hooks.postUpdateChild: ", "never called", "neither does Metacontroller"},
			},
		},
		{
			name: "a patch hook's etag is ignored",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Patches[0].Webhook.Etag = &metacontroller.WebhookEtagConfig{Enabled: ptr(true)}
			},
			want: [][]string{{"spec.hooks.patches[0].webhook.etag: ", "ignored", "always called"}},
		},
		{
			name:   "hook without a webhook is never called",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Customize.Webhook = nil },
			want:   [][]string{{"spec.hooks.customize: ", "no webhook", "never called"}},
		},

		// webhook address
		{
			name:   "path alongside url is ignored",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Path = ptr("/other") },
			want:   [][]string{{"spec.hooks.sync.webhook.path: ", "ignored"}},
		},
		{
			name: "service alongside url is ignored",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Service = &metacontroller.ServiceReference{Name: "foo-hooks", Namespace: "hooks"}
			},
			want: [][]string{{"spec.hooks.sync.webhook.service: ", "ignored because url is set"}},
		},
		{
			name: "url with a query draws no warning",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com/sync?hook=sync&x=1")
			},
		},
		{
			name: "url with a fragment",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com/sync#top")
			},
			want: [][]string{{"spec.hooks.sync.webhook.url: ", "fragment", "never sent"}},
		},
		{
			name: "url with user info is sent as basic credentials",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://admin:s3cr3t@hooks.example.com/sync")
				syncWH(cc).Authorization = nil
			},
			want:           [][]string{{"spec.hooks.sync.webhook.url: ", "user info", "basic credentials", "basicAuth"}},
			mustNotMention: "s3cr3t",
		},
		{
			name: "url with user info is not sent when authorization is set",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://ghp_token123@hooks.example.com/sync")
			},
			want:           [][]string{{"spec.hooks.sync.webhook.url: ", "user info", "not sent", "spec.hooks.sync.webhook.authorization"}},
			mustNotMention: "ghp_token123",
		},

		// webhook call settings
		{
			name: "timeout under a second",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: 500 * time.Millisecond}
			},
			want: [][]string{{"spec.hooks.sync.webhook.timeout: ", "500ms"}},
		},
		{
			name: "timeout of one second draws no warning",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: time.Second}
			},
		},
		{
			name:   "timeout of zero is replaced by the default",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Timeout = &metav1.Duration{} },
			want:   [][]string{{"spec.hooks.sync.webhook.timeout: ", "0s is not a positive duration", "default 10s"}},
		},
		{
			name: "negative timeout is replaced by the default",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: -5 * time.Second}
			},
			want: [][]string{{"spec.hooks.sync.webhook.timeout: ", "-5s", "default 10s"}},
		},
		{
			name: "timeout of exactly 30s draws no warning",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: 30 * time.Second}
			},
		},
		{
			name: "timeout over 30s is used but holds a worker",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Finalize.Webhook.Timeout = &metav1.Duration{Duration: 45 * time.Second}
			},
			want: [][]string{{"spec.hooks.finalize.webhook.timeout: ", "45s is used as given", "over 30s", "worker"}},
		},
		{
			name: "negative etag seconds mean never",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Etag.CacheTimeoutSeconds = ptr[int32](-1)
				syncWH(cc).Etag.CacheCleanupSeconds = ptr[int32](-2)
			},
			want: [][]string{
				{"spec.hooks.sync.webhook.etag.cacheTimeoutSeconds: ", "-1", "never expire"},
				{"spec.hooks.sync.webhook.etag.cacheCleanupSeconds: ", "-2", "never dropped"},
			},
		},
		{
			name: "inline CA certificate that does not parse is ignored",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.Inline = ptr(testCAPEM() + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})))
			},
			want: [][]string{{"spec.hooks.sync.webhook.caBundle.inline: ", "certificate 2", "ignored"}},
		},

		// credentials in clear text
		{
			name:   "plain http url with authorization sends credentials in clear text",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("http://hooks.example.com/sync") },
			want:   [][]string{{"spec.hooks.sync.webhook.url: ", "spec.hooks.sync.webhook.authorization", "clear text"}},
		},
		{
			name: "plain http url with basicAuth sends credentials in clear text",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("HTTP://hooks.example.com/sync")
				syncWH(cc).Authorization = nil
				syncWH(cc).BasicAuth = &metacontroller.BasicAuthConfig{SecretRef: metacontroller.SecretReference{Name: "b", Namespace: "hooks"}}
			},
			want: [][]string{{"spec.hooks.sync.webhook.url: ", "spec.hooks.sync.webhook.basicAuth", "clear text"}},
		},
		{
			name: "plain http url whose host's endpointConfig has credentials",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("http://Hooks.Example.com:8443/sync")
				syncWH(cc).Authorization = nil
				syncWH(cc).CABundle = nil
			},
			want: [][]string{{"spec.hooks.sync.webhook.url: ", "spec.endpointConfigs[0].basicAuth", "clear text"}},
		},
		{
			// A webhook's own connection settings replace its host's.
			name: "plain http url with its own caBundle does not use its host's endpointConfig",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("http://hooks.example.com:8443/sync")
				syncWH(cc).Authorization = nil
			},
		},
		{
			name: "plain http url without credentials draws no warning",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("http://hooks.example.com/sync")
				syncWH(cc).Authorization = nil
			},
		},
		{
			name: "http service with credentials sends them in clear text",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Finalize.Webhook.Service.Protocol = ptr("http")
			},
			want: [][]string{{"spec.hooks.finalize.webhook.service.protocol: ", "spec.hooks.finalize.webhook.basicAuth", "clear text"}},
		},
		{
			name: "HTTPS service is not plain http",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Finalize.Webhook.Service.Protocol = ptr("HTTPS")
			},
		},

		// parent and children
		{
			name:   "no child resources",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ChildResources = nil },
			want:   [][]string{{"spec.childResources: ", "no children"}},
		},
		{
			name: "empty revisionHistory fieldPath selects nothing",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.RevisionHistory.FieldPaths = []string{"spec.template", " "}
			},
			want: [][]string{{"spec.parentResource.revisionHistory.fieldPaths[1]: ", "ignored"}},
		},
		{
			name: "child equal to the parent may adopt other parents",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: cc.Spec.ParentResource.ResourceRule})
			},
			want: [][]string{{"spec.childResources[1]: ", "spec.parentResource", "generateSelector"}},
		},
		{
			name: "child resource listed twice",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources, cc.Spec.ChildResources[0])
			},
			want: [][]string{{"spec.childResources[1]: ", "already listed at spec.childResources[0]", "first entry"}},
		},
		{
			name: "child resources v1 and /v1 are the same core version",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"}},
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "/v1", Resource: "configmaps"}},
				)
			},
			want: [][]string{{"spec.childResources[2]: ", "already listed at spec.childResources[1]"}},
		},
		{
			name: "status checks are ignored with InPlace",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions = []metacontroller.StatusConditionCheck{{Type: "Ready"}}
			},
			want: [][]string{{"spec.childResources[0].updateStrategy.statusChecks: ", `ignored with method "InPlace"`, "RollingRecreate"}},
		},
		{
			name: "status checks are ignored with the default method",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy = &metacontroller.CompositeControllerChildUpdateStrategy{
					StatusChecks: metacontroller.ChildUpdateStatusChecks{Conditions: []metacontroller.StatusConditionCheck{{Type: "Ready"}}},
				}
			},
			want: [][]string{{"spec.childResources[0].updateStrategy.statusChecks: ", `ignored with method "OnDelete"`}},
		},
		{
			name: "status checks with a rolling method draw no warning",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.Method = metacontroller.ChildUpdateRollingInPlace
				cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions = []metacontroller.StatusConditionCheck{{Type: "Ready"}}
			},
		},

		// endpointConfigs
		{
			name: "endpointConfig host listed twice",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, metacontroller.EndpointConfig{Host: "Hooks.Example.COM:8443"})
			},
			want: [][]string{{"spec.endpointConfigs[1].host: ", "spec.endpointConfigs[0]", "never used"}},
		},
		{
			name: "endpointConfig hosts that can match no hook",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs = nil
				for _, h := range malformedHosts {
					cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, metacontroller.EndpointConfig{Host: h})
				}
			},
			want: func() [][]string {
				var want [][]string
				for i := range malformedHosts {
					want = append(want, []string{field.NewPath("spec", "endpointConfigs").Index(i).Child("host").String() + ": ", "never used"})
				}
				return want
			}(),
		},

		// resync
		{
			name:   "resync period under five seconds",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](3) },
			want:   [][]string{{"spec.resyncPeriodSeconds: ", "3", "every 3s"}},
		},
		{
			name:   "resync period of five seconds draws no warning",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](5) },
		},
		{
			name:   "resync period of zero means every second, as in Metacontroller",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](0) },
			want:   [][]string{{"spec.resyncPeriodSeconds: ", "0 means", "every second"}},
		},
		{
			name:   "negative resync period means every second, as in Metacontroller",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](-5) },
			want:   [][]string{{"spec.resyncPeriodSeconds: ", "-5 means", "every second"}},
		},
		{
			name:   "unset resync period draws no warning",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = nil },
		},

		{
			name: "object without webhooks gets only the warnings about that",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Sync.Webhook = nil
				cc.Spec.Hooks.Customize = nil
				cc.Spec.Hooks.Finalize = &metacontroller.Hook{}
			},
			want: [][]string{{"spec.hooks.finalize: ", "never called"}},
		},
		{
			name:   "object without hooks does not panic",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks = nil },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc := validCompositeController()
			tc.mutate(cc)
			got := Warnings(cc, exprs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d warnings, want %d: %q", len(got), len(tc.want), got)
			}
			for _, parts := range tc.want {
				found := false
				for _, w := range got {
					if containsAll(w, parts) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("no warning contains all of %q; warnings: %q", parts, got)
				}
			}
			if tc.mustNotMention != "" && strings.Contains(strings.Join(got, "\n"), tc.mustNotMention) {
				t.Errorf("warnings mention %q: %q", tc.mustNotMention, got)
			}
		})
	}
}

// TestEveryRelaxedRuleWarnsInsteadOfRejecting checks, for each value this
// server used to reject although Metacontroller accepts it, that the object
// is now valid and that a warning names the field.
func TestEveryRelaxedRuleWarnsInsteadOfRejecting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(cc *metacontroller.CompositeController)
		field  string
	}{
		{"timeout over 30s", func(cc *metacontroller.CompositeController) {
			syncWH(cc).Timeout = &metav1.Duration{Duration: 45 * time.Second}
		}, syncWebhook + ".timeout"},
		{"timeout of zero", func(cc *metacontroller.CompositeController) { syncWH(cc).Timeout = &metav1.Duration{} }, syncWebhook + ".timeout"},
		{"status checks with InPlace", func(cc *metacontroller.CompositeController) {
			cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions = []metacontroller.StatusConditionCheck{{Type: "Ready"}}
		}, "spec.childResources[0].updateStrategy.statusChecks"},
		{"url with user info", func(cc *metacontroller.CompositeController) {
			syncWH(cc).URL = ptr("https://user:pw@hooks.example.com/sync")
		}, syncWebhook + ".url"},
		{"url with a fragment", func(cc *metacontroller.CompositeController) {
			syncWH(cc).URL = ptr("https://hooks.example.com/sync#x")
		}, syncWebhook + ".url"},
		{"url and service", func(cc *metacontroller.CompositeController) {
			syncWH(cc).Service = &metacontroller.ServiceReference{Name: "s", Namespace: "n"}
		}, syncWebhook + ".service"},
		{"preUpdateChild", func(cc *metacontroller.CompositeController) {
			cc.Spec.Hooks.PreUpdateChild = &metacontroller.Hook{}
		}, "spec.hooks.preUpdateChild"},
		{"postUpdateChild", func(cc *metacontroller.CompositeController) {
			cc.Spec.Hooks.PostUpdateChild = &metacontroller.Hook{}
		}, "spec.hooks.postUpdateChild"},
		{"finalize without webhook", func(cc *metacontroller.CompositeController) {
			cc.Spec.Hooks.Finalize.Webhook = nil
		}, "spec.hooks.finalize"},
		{"negative etag seconds", func(cc *metacontroller.CompositeController) {
			syncWH(cc).Etag.CacheTimeoutSeconds = ptr[int32](-1)
		}, syncWebhook + ".etag.cacheTimeoutSeconds"},
		{"negative resync period", func(cc *metacontroller.CompositeController) {
			cc.Spec.ResyncPeriodSeconds = ptr[int32](-1)
		}, "spec.resyncPeriodSeconds"},
		{"duplicate child", func(cc *metacontroller.CompositeController) {
			cc.Spec.ChildResources = append(cc.Spec.ChildResources, cc.Spec.ChildResources[0])
		}, "spec.childResources[1]"},
		{"child equal to parent", func(cc *metacontroller.CompositeController) {
			cc.Spec.ChildResources = append(cc.Spec.ChildResources,
				metacontroller.CompositeControllerChildResourceRule{ResourceRule: cc.Spec.ParentResource.ResourceRule})
		}, "spec.childResources[1]"},
		{"empty revisionHistory path", func(cc *metacontroller.CompositeController) {
			cc.Spec.ParentResource.RevisionHistory.FieldPaths = []string{""}
		}, "spec.parentResource.revisionHistory.fieldPaths[0]"},
		{"duplicate endpointConfig host", func(cc *metacontroller.CompositeController) {
			cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, cc.Spec.EndpointConfigs[0])
		}, "spec.endpointConfigs[1].host"},
		{"endpointConfig host with a scheme", func(cc *metacontroller.CompositeController) {
			cc.Spec.EndpointConfigs[0].Host = "https://hooks.example.com"
		}, "spec.endpointConfigs[0].host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := validCompositeController()
			tc.mutate(cc)
			if errs := ValidateCompositeController(cc, exprs); len(errs) > 0 {
				t.Errorf("rejected: %v", errs.ToAggregate())
			}
			old := validCompositeController()
			if errs := ValidateCompositeControllerUpdate(cc, old, exprs); len(errs) > 0 {
				t.Errorf("update rejected: %v", errs.ToAggregate())
			}
			found := false
			for _, w := range Warnings(cc, exprs) {
				if strings.HasPrefix(w, tc.field+": ") {
					found = true
				}
			}
			if !found {
				t.Errorf("no warning at %s: %q", tc.field, Warnings(cc, exprs))
			}
		})
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// exprs is the patch engine's own compiler, as the registry passes it.
var exprs Expressions = apicheck.Expressions{}
