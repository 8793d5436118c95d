// Package validation checks CompositeControllers before they are stored.
//
// It works on the internal types, after defaulting. Its rules are the ones
// Metacontroller itself would otherwise only discover at run time (a hook it
// cannot call, a child it cannot tell apart from its parent), so that a
// mistake is reported to whoever wrote the object instead of surfacing later
// as a failing controller loop. Things Metacontroller accepts but that are
// probably mistakes are reported by Warnings rather than rejected.
package validation

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

const (
	// MaxHookTimeout is the longest hook timeout accepted. Metacontroller
	// calls hooks from its sync loop, so one slow hook holds up every parent
	// queued behind it.
	MaxHookTimeout = 30 * time.Second
	// MaxWorkers bounds spec.workers.
	MaxWorkers = 64

	// shortHookTimeout is the timeout below which a hook call is warned
	// about: few webhooks answer reliably within it, so the controller would
	// mostly see timeouts.
	shortHookTimeout = time.Second

	// shortResyncPeriodSeconds is the resync period below which a warning is
	// given: every parent is then synced, and every hook called, several
	// times a minute even when nothing changed.
	shortResyncPeriodSeconds = 5
)

var (
	supportedUpdateMethods = []metacontroller.ChildUpdateMethod{
		metacontroller.ChildUpdateOnDelete,
		metacontroller.ChildUpdateRecreate,
		metacontroller.ChildUpdateInPlace,
		metacontroller.ChildUpdateRollingRecreate,
		metacontroller.ChildUpdateRollingInPlace,
	}
	supportedHookVersions = []metacontroller.HookVersion{
		metacontroller.HookVersionV1,
		metacontroller.HookVersionV2,
	}
	supportedUnmarshallModes = []metacontroller.ResponseUnmarshallMode{
		metacontroller.ResponseUnmarshallModeLoose,
		metacontroller.ResponseUnmarshallModeStrict,
	}
	supportedServiceProtocols = []string{"http", "https"}
	supportedURLSchemes       = []string{"http", "https"}
)

// ValidateCompositeController validates a CompositeController on creation.
// CompositeControllers are cluster-scoped, so a namespace is forbidden, and
// the name only has to be usable as a path segment.
func ValidateCompositeController(cc *metacontroller.CompositeController) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&cc.ObjectMeta, false, path.ValidatePathSegmentName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateSpec(&cc.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateCompositeControllerUpdate validates an update of a
// CompositeController. The spec has no immutable fields: the embedded
// controller is restarted with the new spec, so the new spec is validated
// as on creation.
func ValidateCompositeControllerUpdate(newCC, oldCC *metacontroller.CompositeController) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newCC.ObjectMeta, &oldCC.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateSpec(&newCC.Spec, field.NewPath("spec"))...)
	return allErrs
}

// ValidateCompositeControllerStatusUpdate validates an update through the
// status subresource. The spec is not validated: the status strategy keeps
// the stored one, which was validated when it was written.
func ValidateCompositeControllerStatusUpdate(newCC, oldCC *metacontroller.CompositeController) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newCC.ObjectMeta, &oldCC.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateStatus(&newCC.Status, field.NewPath("status"))...)
	return allErrs
}

func validateStatus(status *metacontroller.CompositeControllerStatus, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateConditions(status.Conditions, fldPath.Child("conditions"))
	allErrs = append(allErrs, validateNonNegative(int64(status.ObservedGeneration), fldPath.Child("observedGeneration"))...)
	allErrs = append(allErrs, validateNonNegative(int64(status.Parents), fldPath.Child("parents"))...)
	allErrs = append(allErrs, validateNonNegative(int64(status.Children), fldPath.Child("children"))...)
	return allErrs
}

func validateNonNegative(value int64, fldPath *field.Path) field.ErrorList {
	if value < 0 {
		return field.ErrorList{field.Invalid(fldPath, value, "must be greater than or equal to 0")}
	}
	return nil
}

func validateSpec(spec *metacontroller.CompositeControllerSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	parentPath := fldPath.Child("parentResource")
	allErrs = append(allErrs, validateResourceRule(&spec.ParentResource.ResourceRule, parentPath)...)
	if rh := spec.ParentResource.RevisionHistory; rh != nil {
		for i, p := range rh.FieldPaths {
			// An empty path would select the whole parent, status and
			// metadata included, so every status write would look like a
			// new revision.
			if strings.TrimSpace(p) == "" {
				allErrs = append(allErrs, field.Required(parentPath.Child("revisionHistory", "fieldPaths").Index(i), "must be a dotted path of a parent field, e.g. \"spec.template\""))
			}
		}
	}
	if spec.ParentResource.LabelSelector != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(spec.ParentResource.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, parentPath.Child("labelSelector"))...)
	}

	allErrs = append(allErrs, validateChildResources(spec.ChildResources, resourceKey(&spec.ParentResource.ResourceRule), fldPath.Child("childResources"))...)

	if spec.Hooks == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("hooks"), "a sync hook is required"))
	} else {
		allErrs = append(allErrs, validateHooks(spec.Hooks, fldPath.Child("hooks"))...)
	}

	allErrs = append(allErrs, validateEndpointConfigs(spec.EndpointConfigs, fldPath.Child("endpointConfigs"))...)

	if spec.ResyncPeriodSeconds != nil && *spec.ResyncPeriodSeconds < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("resyncPeriodSeconds"), *spec.ResyncPeriodSeconds, "must be greater than or equal to 0 (0 resyncs only on change)"))
	}
	// Each worker holds a hook call open: bound them so one controller
	// cannot exhaust the server.
	if spec.Workers != nil && (*spec.Workers < 1 || *spec.Workers > MaxWorkers) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("workers"), *spec.Workers, fmt.Sprintf("must be between 1 and %d", MaxWorkers)))
	}
	return allErrs
}

// validateResourceRule checks that a rule names a resource the way the
// discovery API does: a group/version and a plural resource name.
func validateResourceRule(rule *metacontroller.ResourceRule, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	apiVersionPath := fldPath.Child("apiVersion")
	if rule.APIVersion == "" {
		allErrs = append(allErrs, field.Required(apiVersionPath, "must be a group/version such as \"apps/v1\", or a version such as \"v1\" for the core group"))
	} else if gv, err := schema.ParseGroupVersion(rule.APIVersion); err != nil {
		allErrs = append(allErrs, field.Invalid(apiVersionPath, rule.APIVersion, "must be a group/version such as \"apps/v1\", or a version such as \"v1\" for the core group"))
	} else {
		if gv.Version == "" {
			allErrs = append(allErrs, field.Invalid(apiVersionPath, rule.APIVersion, "must include a version, e.g. \"apps/v1\""))
		} else {
			// API versions are DNS-1035 labels (CustomResourceDefinition
			// validation enforces this), so anything else names no API.
			for _, msg := range utilvalidation.IsDNS1035Label(gv.Version) {
				allErrs = append(allErrs, field.Invalid(apiVersionPath, rule.APIVersion, "version: "+msg))
			}
		}
		if gv.Group != "" {
			for _, msg := range utilvalidation.IsDNS1123Subdomain(gv.Group) {
				allErrs = append(allErrs, field.Invalid(apiVersionPath, rule.APIVersion, "group: "+msg))
			}
		}
	}

	resourcePath := fldPath.Child("resource")
	switch {
	case rule.Resource == "":
		allErrs = append(allErrs, field.Required(resourcePath, "must be the plural resource name, e.g. \"deployments\""))
	case strings.Contains(rule.Resource, "/"):
		// Metacontroller looks the resource up by name in discovery and
		// creates, updates and deletes its objects; a subresource cannot
		// be managed that way.
		allErrs = append(allErrs, field.Invalid(resourcePath, rule.Resource, "must be a resource name, not a subresource: may not contain '/'"))
	default:
		for _, msg := range utilvalidation.IsDNS1123Label(rule.Resource) {
			allErrs = append(allErrs, field.Invalid(resourcePath, rule.Resource, "must be the lower-case plural resource name: "+msg))
		}
	}
	return allErrs
}

// resourceKey is how resource rules are compared: by parsed group/version,
// so that "v1" and "/v1" are the same core version, and by resource. It is
// empty for a rule too malformed to compare; such a rule already has its
// own errors.
func resourceKey(rule *metacontroller.ResourceRule) string {
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil || gv.Version == "" || rule.Resource == "" {
		return ""
	}
	return gv.WithResource(rule.Resource).String()
}

func validateChildResources(children []metacontroller.CompositeControllerChildResourceRule, parentKey string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := make(map[string]bool, len(children))
	for i := range children {
		child := &children[i]
		idxPath := fldPath.Index(i)
		allErrs = append(allErrs, validateResourceRule(&child.ResourceRule, idxPath)...)

		if key := resourceKey(&child.ResourceRule); key != "" {
			switch {
			case key == parentKey:
				// Every parent would be one of its own children: the
				// controller would adopt, and could delete, the parents.
				allErrs = append(allErrs, field.Invalid(idxPath, key, "a resource cannot be its own child: this is the same apiVersion and resource as spec.parentResource"))
			case seen[key]:
				// Children are keyed by resource; a second rule would make
				// which update strategy applies ambiguous.
				allErrs = append(allErrs, field.Duplicate(idxPath, key))
			}
			seen[key] = true
		}

		if child.UpdateStrategy != nil {
			allErrs = append(allErrs, validateUpdateStrategy(child.UpdateStrategy, idxPath.Child("updateStrategy"))...)
		}
	}
	return allErrs
}

func validateUpdateStrategy(strategy *metacontroller.CompositeControllerChildUpdateStrategy, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	// An empty method is defaulted to OnDelete; it is accepted here too so
	// that validation does not depend on defaulting having run.
	if strategy.Method != "" && !slices.Contains(supportedUpdateMethods, strategy.Method) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("method"), strategy.Method, supportedUpdateMethods))
	}

	conditionsPath := fldPath.Child("statusChecks", "conditions")
	rolling := strategy.Method == metacontroller.ChildUpdateRollingRecreate || strategy.Method == metacontroller.ChildUpdateRollingInPlace
	if len(strategy.StatusChecks.Conditions) > 0 && !rolling {
		// Only rolling updates wait for a child to become healthy; with
		// any other method the checks would silently never run.
		allErrs = append(allErrs, field.Forbidden(conditionsPath, fmt.Sprintf("status checks may only be set when method is %q or %q", metacontroller.ChildUpdateRollingRecreate, metacontroller.ChildUpdateRollingInPlace)))
	}
	for i, cond := range strategy.StatusChecks.Conditions {
		if cond.Type == "" {
			allErrs = append(allErrs, field.Required(conditionsPath.Index(i).Child("type"), "the condition type to check, e.g. \"Ready\""))
		}
	}
	return allErrs
}

// namedHook is a hook with the name of its field.
type namedHook struct {
	name string
	hook *metacontroller.Hook
}

// hookFields lists the hooks of a CompositeController by field name, in
// field order, so that all of them get the same checks and warnings.
func hookFields(hooks *metacontroller.CompositeControllerHooks) []namedHook {
	return []namedHook{
		{"customize", hooks.Customize},
		{"sync", hooks.Sync},
		{"finalize", hooks.Finalize},
	}
}

func validateHooks(hooks *metacontroller.CompositeControllerHooks, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if hooks.Sync == nil {
		// Without a sync hook the controller has no way to compute the
		// children or the status of a parent.
		allErrs = append(allErrs, field.Required(fldPath.Child("sync"), "a sync hook computes each parent's children and status"))
	}
	for _, h := range hookFields(hooks) {
		if h.hook != nil {
			allErrs = append(allErrs, validateHook(h.hook, fldPath.Child(h.name))...)
		}
	}
	return allErrs
}

func validateHook(hook *metacontroller.Hook, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if hook.Version != nil && !slices.Contains(supportedHookVersions, *hook.Version) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("version"), *hook.Version, supportedHookVersions))
	}
	if hook.Webhook == nil {
		// Webhooks are the only kind of hook, so a hook without one
		// could never be called.
		allErrs = append(allErrs, field.Required(fldPath.Child("webhook"), "how the hook is called"))
	} else {
		allErrs = append(allErrs, validateWebhook(hook.Webhook, fldPath.Child("webhook"))...)
	}
	return allErrs
}

func validateWebhook(wh *metacontroller.Webhook, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	switch {
	case wh.URL == nil && wh.Service == nil:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of url or service must be set"))
	case wh.URL != nil && wh.Service != nil:
		allErrs = append(allErrs, field.Invalid(fldPath, field.OmitValueType{}, "exactly one of url or service may be set, not both"))
	}
	if wh.URL != nil {
		allErrs = append(allErrs, validateWebhookURL(*wh.URL, fldPath.Child("url"))...)
	}
	if wh.Service != nil {
		allErrs = append(allErrs, validateServiceReference(wh.Service, fldPath.Child("service"))...)
	}
	// With url the path is ignored (see Warnings), but a path that would be
	// wrong with a service is still rejected so that switching to a
	// service later cannot turn it into a broken address.
	if wh.Path != nil && !strings.HasPrefix(*wh.Path, "/") {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("path"), *wh.Path, "must start with '/'"))
	}

	if wh.Timeout != nil {
		timeoutPath := fldPath.Child("timeout")
		switch d := wh.Timeout.Duration; {
		case d <= 0:
			allErrs = append(allErrs, field.Invalid(timeoutPath, d.String(), "must be greater than 0"))
		case d > MaxHookTimeout:
			allErrs = append(allErrs, field.Invalid(timeoutPath, d.String(), fmt.Sprintf("must be at most %s", MaxHookTimeout)))
		}
	}

	if wh.ResponseUnMarshallMode != nil && !slices.Contains(supportedUnmarshallModes, *wh.ResponseUnMarshallMode) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("responseUnMarshallMode"), *wh.ResponseUnMarshallMode, supportedUnmarshallModes))
	}

	if wh.Etag != nil {
		etagPath := fldPath.Child("etag")
		if v := wh.Etag.CacheTimeoutSeconds; v != nil {
			allErrs = append(allErrs, validateNonNegative(int64(*v), etagPath.Child("cacheTimeoutSeconds"))...)
		}
		if v := wh.Etag.CacheCleanupSeconds; v != nil {
			allErrs = append(allErrs, validateNonNegative(int64(*v), etagPath.Child("cacheCleanupSeconds"))...)
		}
	}

	allErrs = append(allErrs, validateConnection(wh.CABundle, wh.ClientTLS, wh.Authorization, wh.BasicAuth, fldPath)...)
	return allErrs
}

// validateWebhookURL checks that a hook URL can be called as it is. The URL
// may carry credentials, so errors show it redacted, or not at all when it
// does not parse.
func validateWebhookURL(raw string, fldPath *field.Path) field.ErrorList {
	if raw == "" {
		return field.ErrorList{field.Required(fldPath, "must be an absolute http or https URL")}
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL; only its cause is reported.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return field.ErrorList{field.Invalid(fldPath, field.OmitValueType{}, fmt.Sprintf("must be a valid URL: %v", err))}
	}
	shown := redactURL(u)

	if !u.IsAbs() {
		// Without a scheme the rest (host, path) cannot be told apart
		// either, so nothing more is worth reporting.
		return field.ErrorList{field.Invalid(fldPath, shown, "must be an absolute URL with scheme http or https")}
	}

	var allErrs field.ErrorList
	if !slices.Contains(supportedURLSchemes, strings.ToLower(u.Scheme)) {
		allErrs = append(allErrs, field.Invalid(fldPath, shown, fmt.Sprintf("scheme %q is not supported: must be http or https", u.Scheme)))
	}
	if u.Host == "" {
		allErrs = append(allErrs, field.Invalid(fldPath, shown, "must have a host"))
	}
	if u.User != nil {
		// Credentials in the URL end up in logs and in the stored object
		// for everyone who can read it; authorization and basicAuth keep
		// them in a Secret.
		allErrs = append(allErrs, field.Invalid(fldPath, shown, "may not contain user info; use authorization or basicAuth with a Secret instead"))
	}
	if u.RawQuery != "" || u.ForceQuery {
		allErrs = append(allErrs, field.Invalid(fldPath, shown, "may not contain a query"))
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		allErrs = append(allErrs, field.Invalid(fldPath, shown, "may not contain a fragment"))
	}
	return allErrs
}

// redactURL is how a hook URL is shown in errors. User info and query
// values are replaced: either may be a credential (a token as user name, an
// API key as query parameter), and errors end up in clients' logs.
func redactURL(u *url.URL) string {
	shown := *u
	if shown.User != nil {
		shown.User = url.User("xxxxx")
	}
	if shown.RawQuery != "" {
		q := shown.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		shown.RawQuery = q.Encode()
	}
	return shown.String()
}

func validateServiceReference(svc *metacontroller.ServiceReference, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateDNSLabel(svc.Name, fldPath.Child("name"))...)
	allErrs = append(allErrs, validateDNSLabel(svc.Namespace, fldPath.Child("namespace"))...)
	if svc.Port != nil {
		for _, msg := range utilvalidation.IsValidPortNum(int(*svc.Port)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), *svc.Port, msg))
		}
	}
	if svc.Protocol != nil && !slices.Contains(supportedServiceProtocols, *svc.Protocol) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("protocol"), *svc.Protocol, supportedServiceProtocols))
	}
	return allErrs
}

// validateConnection checks the connection settings shared by webhooks and
// endpointConfigs.
//
// authorization and basicAuth both set the Authorization header, so only
// one of them can take effect; setting both is reported as Forbidden at
// basicAuth, the field that would otherwise be silently dropped.
func validateConnection(ca *metacontroller.CABundleConfig, clientTLS *metacontroller.ClientTLSConfig, authz *metacontroller.AuthorizationConfig, basic *metacontroller.BasicAuthConfig, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if ca != nil {
		allErrs = append(allErrs, validateCABundle(ca, fldPath.Child("caBundle"))...)
	}
	if clientTLS != nil {
		tlsPath := fldPath.Child("clientTLS")
		allErrs = append(allErrs, validateSecretReference(&clientTLS.SecretRef, tlsPath.Child("secretRef"))...)
		allErrs = append(allErrs, validateOptionalKey(clientTLS.CertKey, tlsPath.Child("certKey"))...)
		allErrs = append(allErrs, validateOptionalKey(clientTLS.PrivateKeyKey, tlsPath.Child("privateKeyKey"))...)
	}
	if authz != nil {
		allErrs = append(allErrs, validateAuthorization(authz, fldPath.Child("authorization"))...)
	}
	if basic != nil {
		basicPath := fldPath.Child("basicAuth")
		if authz != nil {
			allErrs = append(allErrs, field.Forbidden(basicPath, "may not be set together with authorization: both set the Authorization header"))
		}
		allErrs = append(allErrs, validateSecretReference(&basic.SecretRef, basicPath.Child("secretRef"))...)
		allErrs = append(allErrs, validateOptionalKey(basic.UsernameKey, basicPath.Child("usernameKey"))...)
		allErrs = append(allErrs, validateOptionalKey(basic.PasswordKey, basicPath.Child("passwordKey"))...)
	}
	return allErrs
}

func validateCABundle(ca *metacontroller.CABundleConfig, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	var set []string
	if ca.Inline != nil {
		set = append(set, "inline")
	}
	if ca.SecretRef != nil {
		set = append(set, "secretRef")
	}
	if ca.ConfigMapRef != nil {
		set = append(set, "configMapRef")
	}
	switch len(set) {
	case 0:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of inline, secretRef or configMapRef must be set"))
	case 1:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, strings.Join(set, ", "), "exactly one of inline, secretRef or configMapRef may be set"))
	}

	if ca.Inline != nil {
		allErrs = append(allErrs, validateInlineCABundle(*ca.Inline, fldPath.Child("inline"))...)
	}
	if ca.SecretRef != nil {
		allErrs = append(allErrs, validateKeyReference(ca.SecretRef, false, fldPath.Child("secretRef"))...)
	}
	if ca.ConfigMapRef != nil {
		allErrs = append(allErrs, validateKeyReference(ca.ConfigMapRef, false, fldPath.Child("configMapRef"))...)
	}
	return allErrs
}

// validateInlineCABundle checks that an inline bundle holds certificates
// Go's TLS stack can use. A bundle without any would make every call fail
// verification; other PEM blocks are ignored, as x509.CertPool does.
func validateInlineCABundle(bundle string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	certs := 0
	rest := []byte(bundle)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		certs++
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			// The bundle itself is not echoed: it is long and says nothing
			// the message does not.
			allErrs = append(allErrs, field.Invalid(fldPath, field.OmitValueType{}, fmt.Sprintf("certificate %d does not parse: %v", certs, err)))
		}
	}
	if certs == 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, field.OmitValueType{}, "must contain at least one PEM-encoded CERTIFICATE block"))
	}
	return allErrs
}

func validateAuthorization(authz *metacontroller.AuthorizationConfig, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	// An empty type is defaulted to Bearer.
	if authz.Type != "" {
		typePath := fldPath.Child("type")
		switch {
		case strings.EqualFold(authz.Type, "Basic"):
			// basicAuth builds the base64 "user:password" credential
			// itself; a raw Basic credential in a Secret is easy to get
			// wrong and is what basicAuth exists for.
			allErrs = append(allErrs, field.Invalid(typePath, authz.Type, "may not be \"Basic\": use basicAuth instead"))
		case !isHTTPToken(authz.Type):
			// The scheme is written into the Authorization header as is.
			allErrs = append(allErrs, field.Invalid(typePath, authz.Type, "must be an HTTP authentication scheme such as \"Bearer\": letters, digits and !#$%&'*+-.^_`|~ only"))
		}
	}
	allErrs = append(allErrs, validateKeyReference(&authz.SecretRef, true, fldPath.Child("secretRef"))...)
	return allErrs
}

// isHTTPToken reports whether s is a token as defined by RFC 9110, which
// an authentication scheme must be.
func isHTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// validateKeyReference checks a reference to one key of a Secret or
// ConfigMap. keyRequired is set where no default key exists.
func validateKeyReference(ref *metacontroller.KeyReference, keyRequired bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateObjectName(ref.Name, fldPath.Child("name"))...)
	allErrs = append(allErrs, validateDNSLabel(ref.Namespace, fldPath.Child("namespace"))...)
	if ref.Key == "" {
		if keyRequired {
			allErrs = append(allErrs, field.Required(fldPath.Child("key"), "the key of the Secret that holds the credential"))
		}
	} else {
		allErrs = append(allErrs, validateOptionalKey(ref.Key, fldPath.Child("key"))...)
	}
	return allErrs
}

func validateSecretReference(ref *metacontroller.SecretReference, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateObjectName(ref.Name, fldPath.Child("name"))...)
	allErrs = append(allErrs, validateDNSLabel(ref.Namespace, fldPath.Child("namespace"))...)
	return allErrs
}

// validateObjectName checks the name of a Secret or ConfigMap, which is a
// DNS subdomain.
func validateObjectName(name string, fldPath *field.Path) field.ErrorList {
	return validateRequired(name, fldPath, utilvalidation.IsDNS1123Subdomain)
}

// validateDNSLabel checks a required DNS-1123 label: a namespace, or the
// name of a Service.
func validateDNSLabel(value string, fldPath *field.Path) field.ErrorList {
	return validateRequired(value, fldPath, utilvalidation.IsDNS1123Label)
}

// validateRequired checks a required value with one of apimachinery's
// name validators.
func validateRequired(value string, fldPath *field.Path, check func(string) []string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range check(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

// validateOptionalKey checks a Secret or ConfigMap data key, if set; both
// kinds of object allow the same keys.
func validateOptionalKey(key string, fldPath *field.Path) field.ErrorList {
	if key == "" {
		return nil
	}
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsConfigMapKey(key) {
		allErrs = append(allErrs, field.Invalid(fldPath, key, msg))
	}
	return allErrs
}

func validateEndpointConfigs(configs []metacontroller.EndpointConfig, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := make(map[string]bool, len(configs))
	for i := range configs {
		ec := &configs[i]
		idxPath := fldPath.Index(i)
		hostPath := idxPath.Child("host")
		if ec.Host == "" {
			allErrs = append(allErrs, field.Required(hostPath, "a host or host:port, e.g. \"my-hook.my-ns:8443\""))
		} else {
			allErrs = append(allErrs, validateEndpointHost(ec.Host, hostPath)...)
			// Hosts are matched case-insensitively, so configs differing
			// only in case would compete for the same hooks.
			key := strings.ToLower(ec.Host)
			if seen[key] {
				allErrs = append(allErrs, field.Duplicate(hostPath, ec.Host))
			}
			seen[key] = true
		}
		allErrs = append(allErrs, validateConnection(ec.CABundle, ec.ClientTLS, ec.Authorization, ec.BasicAuth, idxPath)...)
	}
	return allErrs
}

// validateEndpointHost checks that host is what a hook URL's host part can
// be: a DNS name or an IP address (IPv6 in brackets), optionally with a
// port. A scheme or path could never match a hook.
func validateEndpointHost(host string, fldPath *field.Path) field.ErrorList {
	const hostForm = "must be a host or host:port, without scheme or path"
	if strings.Contains(host, "/") {
		return field.ErrorList{field.Invalid(fldPath, host, hostForm)}
	}

	name := host
	switch {
	case strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]"):
		// A bracketed IPv6 address without a port.
		name = host[1 : len(host)-1]
		if ip := net.ParseIP(name); ip == nil || ip.To4() != nil {
			return field.ErrorList{field.Invalid(fldPath, host, "must contain an IPv6 address between brackets")}
		}
		return nil
	case strings.Contains(host, ":"):
		h, port, err := net.SplitHostPort(host)
		if err != nil {
			// net.AddrError repeats the address; only its cause is
			// reported.
			var addrErr *net.AddrError
			if errors.As(err, &addrErr) {
				return field.ErrorList{field.Invalid(fldPath, host, fmt.Sprintf("%s: %s", hostForm, addrErr.Err))}
			}
			return field.ErrorList{field.Invalid(fldPath, host, hostForm)}
		}
		n, err := strconv.Atoi(port)
		if err != nil || len(utilvalidation.IsValidPortNum(n)) > 0 {
			return field.ErrorList{field.Invalid(fldPath, host, "port must be a number between 1 and 65535")}
		}
		if strings.Contains(h, ":") {
			// SplitHostPort only allows colons in a bracketed IPv6
			// address.
			if net.ParseIP(h) == nil {
				return field.ErrorList{field.Invalid(fldPath, host, "must contain an IPv6 address between brackets")}
			}
			return nil
		}
		name = h
	}

	if name == "" {
		return field.ErrorList{field.Invalid(fldPath, host, hostForm+": host is empty")}
	}
	if net.ParseIP(name) != nil {
		return nil
	}
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)) {
		allErrs = append(allErrs, field.Invalid(fldPath, host, msg))
	}
	return allErrs
}

// Warnings returns warnings about a CompositeController that is valid but
// probably not what its author meant. Each warning starts with the path of
// the field concerned.
func Warnings(cc *metacontroller.CompositeController) []string {
	var warnings []string
	spec := &cc.Spec
	specPath := field.NewPath("spec")

	if len(spec.ChildResources) == 0 {
		warnings = append(warnings, fmt.Sprintf("%s: no child resources are listed, so the controller will manage no children", specPath.Child("childResources")))
	}

	if spec.ResyncPeriodSeconds != nil && *spec.ResyncPeriodSeconds > 0 && *spec.ResyncPeriodSeconds < shortResyncPeriodSeconds {
		warnings = append(warnings, fmt.Sprintf("%s: %d is a very short resync period: every parent is synced, and its hooks called, every %ds even when nothing changed", specPath.Child("resyncPeriodSeconds"), *spec.ResyncPeriodSeconds, *spec.ResyncPeriodSeconds))
	}

	if spec.Hooks != nil {
		hooksPath := specPath.Child("hooks")
		for _, h := range hookFields(spec.Hooks) {
			if h.hook == nil || h.hook.Webhook == nil {
				continue
			}
			warnings = append(warnings, webhookWarnings(h.hook.Webhook, spec.EndpointConfigs, hooksPath.Child(h.name, "webhook"))...)
		}
	}
	return warnings
}

func webhookWarnings(wh *metacontroller.Webhook, endpoints []metacontroller.EndpointConfig, fldPath *field.Path) []string {
	var warnings []string

	if wh.URL != nil && wh.Path != nil {
		warnings = append(warnings, fmt.Sprintf("%s: ignored because url is set; Metacontroller only appends path to a service's address, so put the path in url", fldPath.Child("path")))
	}

	if wh.Timeout != nil && wh.Timeout.Duration > 0 && wh.Timeout.Duration < shortHookTimeout {
		warnings = append(warnings, fmt.Sprintf("%s: %s is under %s; most calls are likely to time out", fldPath.Child("timeout"), wh.Timeout.Duration, shortHookTimeout))
	}

	// Credentials over plain http can be read by anyone on the path to the
	// hook. They are either the hook's own or, when it has none, those of
	// the endpointConfig for its host.
	if wh.URL != nil {
		if u, err := url.Parse(*wh.URL); err == nil && strings.EqualFold(u.Scheme, "http") && u.Host != "" {
			if auth := credentialsField(wh.Authorization, wh.BasicAuth); auth != "" {
				warnings = append(warnings, fmt.Sprintf("%s: uses plain http while %s is set; the credentials are sent in clear text", fldPath.Child("url"), fldPath.Child(auth)))
			} else if i, auth := endpointCredentials(endpoints, u.Host); auth != "" {
				warnings = append(warnings, fmt.Sprintf("%s: uses plain http while %s applies to its host; the credentials are sent in clear text", fldPath.Child("url"), field.NewPath("spec", "endpointConfigs").Index(i).Child(auth)))
			}
		}
	}
	if wh.Service != nil && (wh.Service.Protocol == nil || *wh.Service.Protocol == "http") {
		if auth := credentialsField(wh.Authorization, wh.BasicAuth); auth != "" {
			warnings = append(warnings, fmt.Sprintf("%s: is http while %s is set; the credentials are sent in clear text", fldPath.Child("service", "protocol"), fldPath.Child(auth)))
		}
	}
	return warnings
}

// credentialsField names the field holding credentials, if any.
func credentialsField(authz *metacontroller.AuthorizationConfig, basic *metacontroller.BasicAuthConfig) string {
	switch {
	case authz != nil:
		return "authorization"
	case basic != nil:
		return "basicAuth"
	}
	return ""
}

// endpointCredentials finds the endpointConfig for host that has
// credentials, returning its index and the credentials field.
func endpointCredentials(endpoints []metacontroller.EndpointConfig, host string) (int, string) {
	for i := range endpoints {
		ec := &endpoints[i]
		if strings.EqualFold(ec.Host, host) {
			return i, credentialsField(ec.Authorization, ec.BasicAuth)
		}
	}
	return 0, ""
}
