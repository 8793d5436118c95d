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
			name: "parent revisionHistory fieldPaths may not be empty",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ParentResource.RevisionHistory.FieldPaths = []string{"spec.template", ""}
			},
			want: []wantErr{req("spec.parentResource.revisionHistory.fieldPaths[1]")},
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
			name: "child resources must be unique by apiVersion and resource",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources, cc.Spec.ChildResources[0])
			},
			want: []wantErr{dup("spec.childResources[1]")},
		},
		{
			name: "child resources v1 and /v1 are the same core version",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"}},
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "/v1", Resource: "configmaps"}},
				)
			},
			want: []wantErr{dup("spec.childResources[2]")},
		},
		{
			name: "same resource in different versions are different children",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "apps/v1beta1", Resource: "deployments"}})
			},
		},
		{
			name: "child equal to the parent is invalid",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources,
					metacontroller.CompositeControllerChildResourceRule{ResourceRule: cc.Spec.ParentResource.ResourceRule})
			},
			want: []wantErr{inv("spec.childResources[1]")},
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
			name: "status checks are forbidden with a non-rolling method",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions = []metacontroller.StatusConditionCheck{{Type: "Ready"}}
			},
			want: []wantErr{forb("spec.childResources[0].updateStrategy.statusChecks.conditions")},
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
			name:   "finalize hook needs a webhook",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.Hooks.Finalize.Webhook = nil },
			want:   []wantErr{req(finalizeWebhook)},
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
			name: "webhook may not set both url and service",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Service = &metacontroller.ServiceReference{Name: "foo-hooks", Namespace: "hooks"}
			},
			want: []wantErr{inv(syncWebhook)},
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
			name: "webhook url may not carry credentials and errors do not echo them",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://admin:s3cr3t@hooks.example.com/sync")
			},
			want:           []wantErr{inv(syncWebhook + ".url")},
			mustNotMention: "s3cr3t",
		},
		{
			name: "webhook url may not carry a token as user name and errors do not echo it",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://ghp_token123@hooks.example.com/sync")
			},
			want:           []wantErr{inv(syncWebhook + ".url")},
			mustNotMention: "ghp_token123",
		},
		{
			name: "webhook url may not have a query and errors do not echo its values",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com/sync?apiKey=k3y")
			},
			want:           []wantErr{inv(syncWebhook + ".url")},
			mustNotMention: "k3y",
		},
		{
			name:   "webhook url may not have an empty query",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("https://hooks.example.com/sync?") },
			want:   []wantErr{inv(syncWebhook + ".url")},
		},
		{
			name: "webhook url may not have a fragment",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("https://hooks.example.com/sync#top")
			},
			want: []wantErr{inv(syncWebhook + ".url")},
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

		// webhook call settings
		{
			name:   "webhook timeout must be positive",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Timeout = &metav1.Duration{} },
			want:   []wantErr{inv(syncWebhook + ".timeout")},
		},
		{
			name: "webhook timeout may not be negative",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: -time.Second}
			},
			want: []wantErr{inv(syncWebhook + ".timeout")},
		},
		{
			name: "webhook timeout may not exceed 30s",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: 31 * time.Second}
			},
			want: []wantErr{inv(syncWebhook + ".timeout")},
		},
		{
			name: "webhook timeout of exactly 30s is valid",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: 30 * time.Second}
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
			name:   "webhook etag cacheTimeoutSeconds may not be negative",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Etag.CacheTimeoutSeconds = ptr[int32](-1) },
			want:   []wantErr{inv(syncWebhook + ".etag.cacheTimeoutSeconds")},
		},
		{
			name:   "webhook etag cacheCleanupSeconds may not be negative",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Etag.CacheCleanupSeconds = ptr[int32](-1) },
			want:   []wantErr{inv(syncWebhook + ".etag.cacheCleanupSeconds")},
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
			name: "caBundle inline certificate must parse",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).CABundle.Inline = ptr(testCAPEM() + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})))
			},
			want: []wantErr{inv(syncWebhook + ".caBundle.inline")},
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
			name: "endpointConfig hosts must be unique ignoring case",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs = append(cc.Spec.EndpointConfigs, metacontroller.EndpointConfig{Host: "Hooks.Example.COM:8443"})
			},
			want: []wantErr{dup("spec.endpointConfigs[1].host")},
		},
		{
			name: "endpointConfig host may not have a scheme",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].Host = "https://hooks.example.com"
			},
			want: []wantErr{inv("spec.endpointConfigs[0].host")},
		},
		{
			name: "endpointConfig host may not have a path",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].Host = "hooks.example.com/sync"
			},
			want: []wantErr{inv("spec.endpointConfigs[0].host")},
		},
		{
			name: "endpointConfig host port must be at most 65535",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].Host = "hooks.example.com:99999"
			},
			want: []wantErr{inv("spec.endpointConfigs[0].host")},
		},
		{
			name: "endpointConfig host port must be numeric",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.EndpointConfigs[0].Host = "hooks.example.com:https"
			},
			want: []wantErr{inv("spec.endpointConfigs[0].host")},
		},
		{
			name:   "endpointConfig host port may not be empty",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.EndpointConfigs[0].Host = "hooks.example.com:" },
			want:   []wantErr{inv("spec.endpointConfigs[0].host")},
		},
		{
			name:   "endpointConfig host name must be a DNS name",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.EndpointConfigs[0].Host = "hooks_example.com" },
			want:   []wantErr{inv("spec.endpointConfigs[0].host")},
		},
		{
			name:   "endpointConfig IPv6 host must be bracketed",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.EndpointConfigs[0].Host = "fd00::1" },
			want:   []wantErr{inv("spec.endpointConfigs[0].host")},
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
			name:   "resyncPeriodSeconds may not be negative",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](-1) },
			want:   []wantErr{inv("spec.resyncPeriodSeconds")},
		},
		{
			name:   "resyncPeriodSeconds may be zero",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](0) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc := validCompositeController()
			tc.mutate(cc)
			errs := ValidateCompositeController(cc)
			assertErrors(t, errs, tc.want)
			if tc.mustNotMention != "" && strings.Contains(errs.ToAggregate().Error(), tc.mustNotMention) {
				t.Errorf("errors mention %q: %v", tc.mustNotMention, errs.ToAggregate())
			}
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
			assertErrors(t, ValidateCompositeControllerUpdate(newCC, oldCC), tc.want)
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
	}{
		{
			name:   "valid object has no warnings",
			mutate: func(cc *metacontroller.CompositeController) {},
		},
		{
			name:   "path alongside url is ignored",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).Path = ptr("/other") },
			want:   [][]string{{"spec.hooks.sync.webhook.path", "ignored"}},
		},
		{
			name: "timeout under a second",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: 500 * time.Millisecond}
			},
			want: [][]string{{"spec.hooks.sync.webhook.timeout", "500ms"}},
		},
		{
			name: "timeout of one second draws no warning",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).Timeout = &metav1.Duration{Duration: time.Second}
			},
		},
		{
			name:   "plain http url with authorization sends credentials in clear text",
			mutate: func(cc *metacontroller.CompositeController) { syncWH(cc).URL = ptr("http://hooks.example.com/sync") },
			want:   [][]string{{"spec.hooks.sync.webhook.url", "spec.hooks.sync.webhook.authorization", "clear text"}},
		},
		{
			name: "plain http url with basicAuth sends credentials in clear text",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("HTTP://hooks.example.com/sync")
				syncWH(cc).Authorization = nil
				syncWH(cc).BasicAuth = &metacontroller.BasicAuthConfig{SecretRef: metacontroller.SecretReference{Name: "b", Namespace: "hooks"}}
			},
			want: [][]string{{"spec.hooks.sync.webhook.url", "spec.hooks.sync.webhook.basicAuth", "clear text"}},
		},
		{
			name: "plain http url whose host's endpointConfig has credentials",
			mutate: func(cc *metacontroller.CompositeController) {
				syncWH(cc).URL = ptr("http://hooks.example.com:8443/sync")
				syncWH(cc).Authorization = nil
			},
			want: [][]string{{"spec.hooks.sync.webhook.url", "spec.endpointConfigs[0].basicAuth", "clear text"}},
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
			want: [][]string{{"spec.hooks.finalize.webhook.service.protocol", "spec.hooks.finalize.webhook.basicAuth", "clear text"}},
		},
		{
			name:   "no child resources",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ChildResources = nil },
			want:   [][]string{{"spec.childResources", "no children"}},
		},
		{
			name:   "resync period under five seconds",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](3) },
			want:   [][]string{{"spec.resyncPeriodSeconds", "3"}},
		},
		{
			name:   "resync period of five seconds draws no warning",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](5) },
		},
		{
			name:   "resync period of zero draws no warning",
			mutate: func(cc *metacontroller.CompositeController) { cc.Spec.ResyncPeriodSeconds = ptr[int32](0) },
		},
		{
			name: "object without hooks or webhooks gets no hook warnings",
			mutate: func(cc *metacontroller.CompositeController) {
				cc.Spec.Hooks.Sync.Webhook = nil
				cc.Spec.Hooks.Customize = nil
				cc.Spec.Hooks.Finalize = &metacontroller.Hook{}
			},
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
			got := Warnings(cc)
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
