// Package validation checks every kind of the group before it is stored or
// run: CompositeControllers (validation.go, patches.go), DecoratorControllers
// (decoratorcontroller.go, with the hook, resource and resync checks of
// validation.go), ControllerRevisions (controllerrevision.go) and the
// SyncRequests of /sync (syncrequest.go). The registry's strategies only
// call it, as sample-apiserver's do.
//
// apis/ imports nothing from pkg/: the CEL and templates of patches are
// compiled through Expressions, which the patch engine's compiler
// implements.
//
// It works on the internal types, after defaulting. Everything Metacontroller
// accepts is accepted here too, so that manifests written for Metacontroller
// apply unchanged. Where this server and Metacontroller would act differently,
// or a value is probably a mistake, the object is accepted with a warning,
// which kubectl prints on apply. An object is rejected only when
// Metacontroller's own CRD schema rejects it too, or when no controller could
// use the value: a hook that cannot be called, a resource that cannot exist,
// a Secret reference that cannot name a Secret. Metacontroller would accept
// those and then fail at run time, on every sync, in its logs; here the
// mistake is reported to whoever wrote the object.
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

	"golang.org/x/net/http/httpguts"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

const (
	// MaxWorkers bounds spec.workers.
	MaxWorkers = 64

	// defaultHookTimeout is the timeout the hook client uses when a
	// webhook's is unset or not positive; Metacontroller's default.
	defaultHookTimeout = 10 * time.Second
	// longHookTimeout is the timeout above which a hook is warned about.
	// Hooks are called from the controller's workers, so a slow hook holds
	// a worker, and the parents queued behind it, for as long as it takes.
	longHookTimeout = 30 * time.Second
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
func ValidateCompositeController(cc *metacontroller.CompositeController, exprs Expressions) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&cc.ObjectMeta, false, path.ValidatePathSegmentName, field.NewPath("metadata"))
	allErrs = append(allErrs, legacyShapeErrors(cc, nil)...)
	allErrs = append(allErrs, checkSpec(&cc.Spec, exprs).errs...)
	return allErrs
}

// ValidateCompositeControllerUpdate validates an update of a
// CompositeController, after the strategy prepared it (newCC's
// status.revision is the one the update leaves the spec at). The spec has
// no immutable fields: the embedded controller is restarted with the new
// spec, so the new spec is validated as on creation; only the steps of a
// rollout under way must go on past its step.
func ValidateCompositeControllerUpdate(newCC, oldCC *metacontroller.CompositeController, exprs Expressions) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newCC.ObjectMeta, &oldCC.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, legacyShapeErrors(newCC, oldCC)...)
	allErrs = append(allErrs, checkSpec(&newCC.Spec, exprs).errs...)
	return append(allErrs, validateStepsKept(newCC.Spec.Rollout, oldCC.Spec.Rollout, oldCC.Status.Rollout, newCC.Status.Revision, field.NewPath("spec"))...)
}

// legacyShapeErrors are the contradictions the conversion from
// Metacontroller's earliest shape found in the fields the client sent
// (both resource and resources, a hook path beside a webhook url, ...);
// only the request's object carries them. On an update (old is the stored
// object), a hook path beside exactly the stored webhook is no
// contradiction: a merge kept that webhook, and the path replaced it.
func legacyShapeErrors(cc, old *metacontroller.CompositeController) field.ErrorList {
	if cc.LegacyShape == nil {
		return nil
	}
	errs := append(field.ErrorList(nil), cc.LegacyShape.Errors...)
	for _, c := range cc.LegacyShape.HookConflicts {
		if old != nil {
			if stored := hookByName(old.Spec.Hooks, c.Hook); stored != nil && apiequality.Semantic.DeepEqual(stored.Webhook, c.Webhook) {
				continue
			}
		}
		errs = append(errs, c.Errors...)
	}
	return errs
}

// hookByName returns the hook of hooks at spec.hooks.<name>, nil if none.
func hookByName(hooks *metacontroller.CompositeControllerHooks, name string) *metacontroller.Hook {
	if hooks == nil {
		return nil
	}
	for _, h := range append(calledHooks(hooks), uncalledHooks(hooks)...) {
		if h.name == name {
			return h.hook
		}
	}
	return nil
}

// ValidateCompositeControllerStatusUpdate validates an update through the
// status subresource. The spec is not validated: the status strategy keeps
// the stored one, which was validated when it was written.
func ValidateCompositeControllerStatusUpdate(newCC, oldCC *metacontroller.CompositeController) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newCC.ObjectMeta, &oldCC.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateStatus(&newCC.Status, field.NewPath("status"))...)
	return allErrs
}

// Warnings returns warnings about a CompositeController that is accepted but
// that this server uses differently from what its author may expect: a field
// it ignores, a value it replaces, a setting that is probably a mistake. Each
// warning starts with the path of the field concerned.
func Warnings(cc *metacontroller.CompositeController, exprs Expressions) []string {
	warnings := checkSpec(&cc.Spec, exprs).warnings
	if cc.Spec.Hooks != nil && cc.Spec.Hooks.Finalize != nil {
		warnings = append(warnings, finalizerWarnings("compositecontroller-", cc.Name)...)
	}
	return warnings
}

// finalizerWarnings warns when the finalize hook's finalizer,
// metacontroller.io/<kind prefix><name>, is no qualified name: its part
// after the slash has at most 63 characters. Metacontroller names it the
// same way.
func finalizerWarnings(kindPrefix, name string) []string {
	finalizer := kindPrefix + name
	if errs := utilvalidation.IsQualifiedName("metacontroller.io/" + finalizer); len(errs) > 0 {
		return []string{fmt.Sprintf("metadata.name: the finalize hook's finalizer metacontroller.io/%s is not a valid finalizer name (%s), so no object can get it and the finalize hook never runs; use a name of at most %d characters", finalizer, strings.Join(errs, "; "), 63-len(kindPrefix))}
	}
	return nil
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

// checker walks a spec once and collects both what rejects it and what is
// accepted with a warning, so that each rule decides in one place whether a
// value is unusable or only questionable.
type checker struct {
	exprs    Expressions
	errs     field.ErrorList
	warnings []string
}

func (c *checker) err(errs ...*field.Error) {
	c.errs = append(c.errs, errs...)
}

func (c *checker) warn(fldPath *field.Path, format string, args ...any) {
	c.warnings = append(c.warnings, fldPath.String()+": "+fmt.Sprintf(format, args...))
}

func checkSpec(spec *metacontroller.CompositeControllerSpec, exprs Expressions) *checker {
	c := &checker{exprs: exprs}
	fldPath := field.NewPath("spec")

	parentPath := fldPath.Child("parentResource")
	c.err(validateResourceRule(&spec.ParentResource.ResourceRule, parentPath)...)
	if rh := spec.ParentResource.RevisionHistory; rh != nil {
		for i, p := range rh.FieldPaths {
			// Metacontroller looks the path up field by field; an empty
			// one names no field, so it adds nothing to a revision.
			if strings.TrimSpace(p) == "" {
				c.warn(parentPath.Child("revisionHistory", "fieldPaths").Index(i), "an empty path selects no field of the parent, so it is ignored")
			}
		}
	}
	if spec.ParentResource.LabelSelector != nil {
		// Metacontroller fails to start a controller whose selector does
		// not convert to a labels.Selector; these are the same checks.
		c.err(metav1validation.ValidateLabelSelector(spec.ParentResource.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, parentPath.Child("labelSelector"))...)
	}

	c.checkChildResources(spec.ChildResources, resourceKey(&spec.ParentResource.ResourceRule), fldPath.Child("childResources"))

	if spec.Hooks == nil {
		// Metacontroller does not start a controller without hooks ("no
		// hooks defined").
		c.err(field.Required(fldPath.Child("hooks"), "a sync hook is required"))
	} else {
		c.checkHooks(spec.Hooks, spec.EndpointConfigs, fldPath.Child("hooks"))
	}

	c.checkEndpointConfigs(spec.EndpointConfigs, fldPath.Child("endpointConfigs"))

	c.checkResyncPeriod(spec.ResyncPeriodSeconds, fldPath.Child("resyncPeriodSeconds"))
	c.checkOwnChildWrites(spec.OwnChildWrites, fldPath.Child("ownChildWrites"))
	c.checkOwnStatusWrites(spec.OwnStatusWrites, fldPath.Child("ownStatusWrites"))
	// workers is this server's own field, so no Metacontroller manifest
	// sets it. Each worker holds a hook call open: bound them so that one
	// controller cannot exhaust the server.
	if spec.Workers != nil && (*spec.Workers < 1 || *spec.Workers > MaxWorkers) {
		c.err(field.Invalid(fldPath.Child("workers"), *spec.Workers, fmt.Sprintf("must be between 1 and %d", MaxWorkers)))
	}

	if len(spec.ChildResources) == 0 {
		c.warn(fldPath.Child("childResources"), "no child resources are listed, so the controller will manage no children")
	}
	if sa := spec.ServiceAccount; sa != nil {
		c.err(validateServiceAccountReference(sa, fldPath.Child("serviceAccount"))...)
	}
	c.checkRollout(spec.Rollout, spec.RevisionHistoryLimit, fldPath)
	return c
}

// validateServiceAccountReference checks the identity a controller acts
// as: a namespace and a ServiceAccount name, as kube-apiserver names them.
func validateServiceAccountReference(sa *metacontroller.ServiceAccountReference, fldPath *field.Path) field.ErrorList {
	allErrs := validateDNSLabel(sa.Namespace, fldPath.Child("namespace"))
	return append(allErrs, validateRequired(sa.Name, fldPath.Child("name"), utilvalidation.IsDNS1123Subdomain)...)
}

// checkResyncPeriod warns about a resync period that calls the hooks
// every few seconds for every object.
func (c *checker) checkResyncPeriod(p *int32, resyncPath *field.Path) {
	if p == nil {
		return
	}
	switch {
	case *p < 1:
		// Metacontroller's CRD accepts any integer and clamps the
		// period to one second.
		c.warn(resyncPath, "%d means every parent is synced, and its hooks called, every second even when nothing changed (periods under 1s count as 1s, as in Metacontroller); leave it unset to sync only on change", *p)
	case *p < shortResyncPeriodSeconds:
		c.warn(resyncPath, "%d is a very short resync period: every parent is synced, and its hooks called, every %ds even when nothing changed", *p, *p)
	}
}

var supportedOwnChildWrites = []string{string(metacontroller.OwnChildWritesSync), string(metacontroller.OwnChildWritesIgnore)}

// checkOwnChildWrites checks spec.ownChildWrites, this server's own field.
func (c *checker) checkOwnChildWrites(p *metacontroller.OwnChildWritesPolicy, fldPath *field.Path) {
	if p != nil && !slices.Contains(supportedOwnChildWrites, string(*p)) {
		c.err(field.NotSupported(fldPath, *p, supportedOwnChildWrites))
	}
}

var supportedOwnStatusWrites = []string{string(metacontroller.OwnStatusWritesSync), string(metacontroller.OwnStatusWritesIgnore)}

// checkOwnStatusWrites checks spec.ownStatusWrites, this server's own field.
func (c *checker) checkOwnStatusWrites(p *metacontroller.OwnStatusWritesPolicy, fldPath *field.Path) {
	if p != nil && !slices.Contains(supportedOwnStatusWrites, string(*p)) {
		c.err(field.NotSupported(fldPath, *p, supportedOwnStatusWrites))
	}
}

// validateResourceRule checks that a rule names a resource the way the
// discovery API does: a group/version and a plural resource name.
// Metacontroller looks the resource up in discovery by exactly these strings
// and does not start the controller when it finds none; a rule failing these
// checks names a resource no API server can serve.
func validateResourceRule(rule *metacontroller.ResourceRule, fldPath *field.Path) field.ErrorList {
	allErrs := validateAPIVersion(rule.APIVersion, fldPath.Child("apiVersion"))

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

// validateAPIVersion checks a group/version as the discovery API names
// them.
func validateAPIVersion(apiVersion string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if apiVersion == "" {
		return field.ErrorList{field.Required(fldPath, "must be a group/version such as \"apps/v1\", or a version such as \"v1\" for the core group")}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return field.ErrorList{field.Invalid(fldPath, apiVersion, "must be a group/version such as \"apps/v1\", or a version such as \"v1\" for the core group")}
	}
	if gv.Version == "" {
		allErrs = append(allErrs, field.Invalid(fldPath, apiVersion, "must include a version, e.g. \"apps/v1\""))
	} else {
		// API versions are DNS-1035 labels (CustomResourceDefinition
		// validation enforces this), so anything else names no API.
		for _, msg := range utilvalidation.IsDNS1035Label(gv.Version) {
			allErrs = append(allErrs, field.Invalid(fldPath, apiVersion, "version: "+msg))
		}
	}
	if gv.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(gv.Group) {
			allErrs = append(allErrs, field.Invalid(fldPath, apiVersion, "group: "+msg))
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

// describeRule is how a resource rule is named in warnings: as written.
func describeRule(rule *metacontroller.ResourceRule) string {
	return fmt.Sprintf("apiVersion %q, resource %q", rule.APIVersion, rule.Resource)
}

func (c *checker) checkChildResources(children []metacontroller.CompositeControllerChildResourceRule, parentKey string, fldPath *field.Path) {
	first := make(map[string]int, len(children))
	for i := range children {
		child := &children[i]
		idxPath := fldPath.Index(i)
		if key := c.checkChildRule(&child.ResourceRule, first, i, fldPath); key != "" {
			if key == parentKey {
				// Metacontroller accepts this, and it is how a controller
				// builds a tree of objects of one kind. But with a selector
				// that parents match, a parent adopts, and may delete,
				// other parents.
				c.warn(idxPath, "%s is also spec.parentResource: a parent may adopt, and then update or delete, other parents that its selector matches; spec.generateSelector: true limits children to those the parent created", describeRule(&child.ResourceRule))
			}
		}

		if child.UpdateStrategy != nil {
			c.checkUpdateStrategy(child.UpdateStrategy, idxPath.Child("updateStrategy"))
		}
	}
}

// checkChildRule checks the i-th entry of a list of child (or attachment)
// resources: a resource that can exist, not of this server's group, listed
// once (first records where each was first listed). It returns the rule's
// resourceKey.
func (c *checker) checkChildRule(rule *metacontroller.ResourceRule, first map[string]int, i int, fldPath *field.Path) string {
	idxPath := fldPath.Index(i)
	c.err(validateResourceRule(rule, idxPath)...)
	if gv, err := schema.ParseGroupVersion(rule.APIVersion); err == nil && gv.Group == metacontroller.GroupName {
		// The loop writes children in the server's name: a child of
		// this server's own group (a CompositeController, say) would
		// be checked against the server's rights, not the author's,
		// and so lend them the server's.
		c.err(field.Forbidden(idxPath.Child("apiVersion"), "children of "+metacontroller.GroupName+" would be written in composite-apiserver's own name, and checked against its rights rather than the controller's author's"))
	}
	key := resourceKey(rule)
	if key == "" {
		return ""
	}
	if j, ok := first[key]; ok {
		// Metacontroller keeps one informer per resource, so a second
		// entry adds nothing but a possibly different update strategy.
		c.warn(idxPath, "%s is already listed at %s; only that first entry's updateStrategy is used", describeRule(rule), fldPath.Index(j))
	} else {
		first[key] = i
	}
	return key
}

func (c *checker) checkUpdateStrategy(strategy *metacontroller.CompositeControllerChildUpdateStrategy, fldPath *field.Path) {
	c.checkUpdateMethod(strategy.Method, fldPath.Child("method"))

	checksPath := fldPath.Child("statusChecks")
	rolling := strategy.Method == metacontroller.ChildUpdateRollingRecreate || strategy.Method == metacontroller.ChildUpdateRollingInPlace
	if len(strategy.StatusChecks.Conditions) > 0 && !rolling {
		// Metacontroller accepts status checks with every method and only
		// consults them during rolling updates.
		method := strategy.Method
		if method == "" {
			method = metacontroller.ChildUpdateOnDelete
		}
		c.warn(checksPath, "ignored with method %q: only %q and %q wait for status checks", method, metacontroller.ChildUpdateRollingRecreate, metacontroller.ChildUpdateRollingInPlace)
	}
	for i, cond := range strategy.StatusChecks.Conditions {
		// type is required in Metacontroller's CRD; a condition without
		// one could never be met.
		if cond.Type == "" {
			c.err(field.Required(checksPath.Child("conditions").Index(i).Child("type"), "the condition type to check, e.g. \"Ready\""))
		}
	}
}

// checkUpdateMethod checks an update method, an enum in Metacontroller's
// CRD. An empty method is defaulted to OnDelete; it is accepted here too so
// that validation does not depend on defaulting having run.
func (c *checker) checkUpdateMethod(method metacontroller.ChildUpdateMethod, fldPath *field.Path) {
	if method != "" && !slices.Contains(supportedUpdateMethods, method) {
		c.err(field.NotSupported(fldPath, method, supportedUpdateMethods))
	}
}

// calledHooks are the hooks this server calls, by field name, in field
// order, so that all of them get the same checks and warnings.
func calledHooks(hooks *metacontroller.CompositeControllerHooks) []namedHook {
	return []namedHook{
		{"customize", hooks.Customize},
		{"sync", hooks.Sync},
		{"finalize", hooks.Finalize},
	}
}

// uncalledHooks are the hooks Metacontroller's API declares but that
// neither Metacontroller nor this server ever calls.
func uncalledHooks(hooks *metacontroller.CompositeControllerHooks) []namedHook {
	return []namedHook{
		{"preUpdateChild", hooks.PreUpdateChild},
		{"postUpdateChild", hooks.PostUpdateChild},
	}
}

// namedHook is a hook with the name of its field.
type namedHook struct {
	name string
	hook *metacontroller.Hook
}

func (c *checker) checkHooks(hooks *metacontroller.CompositeControllerHooks, endpoints []metacontroller.EndpointConfig, fldPath *field.Path) {
	c.checkCalledHooks(calledHooks(hooks), endpoints, fldPath)
	for _, h := range uncalledHooks(hooks) {
		if h.hook == nil {
			continue
		}
		hookPath := fldPath.Child(h.name)
		// Only what Metacontroller's CRD schema checks: as the hook is
		// never called, nothing else about it matters.
		c.checkHookVersion(h.hook, hookPath)
		if wh := h.hook.Webhook; wh != nil && wh.ResponseUnMarshallMode != nil && !slices.Contains(supportedUnmarshallModes, *wh.ResponseUnMarshallMode) {
			c.err(field.NotSupported(hookPath.Child("webhook", "responseUnMarshallMode"), *wh.ResponseUnMarshallMode, supportedUnmarshallModes))
		}
		c.warn(hookPath, "is accepted for compatibility but never called: this server does not call %s hooks, and neither does Metacontroller", h.name)
	}
	c.checkPatches(hooks.Patches, endpoints, fldPath.Child("patches"))
}

// checkCalledHooks checks the customize, sync and finalize hooks every
// kind of controller has: a sync hook is required, and each hook must be
// callable.
func (c *checker) checkCalledHooks(called []namedHook, endpoints []metacontroller.EndpointConfig, fldPath *field.Path) {
	for _, h := range called {
		if h.name == "sync" && h.hook == nil {
			// Without a sync hook the controller has no way to compute
			// the children or the status of a parent; Metacontroller
			// fails every sync ("sync hook nil/not defined").
			c.err(field.Required(fldPath.Child("sync"), "a sync hook computes each parent's children and status"))
		}
	}
	for _, h := range called {
		if h.hook == nil {
			continue
		}
		hookPath := fldPath.Child(h.name)
		c.checkHookVersion(h.hook, hookPath)
		switch {
		case h.hook.Webhook != nil:
			c.checkWebhook(h.hook.Webhook, endpoints, hookPath.Child("webhook"))
		case h.name == "sync":
			// A sync hook without a webhook is no sync hook: see above.
			c.err(field.Required(hookPath.Child("webhook"), "how the hook is called"))
		default:
			// Metacontroller treats a hook without a webhook as unset.
			c.warn(hookPath, "has no webhook, so it is never called")
		}
	}
}

// checkHookVersion checks the version, an enum in Metacontroller's CRD.
func (c *checker) checkHookVersion(hook *metacontroller.Hook, fldPath *field.Path) {
	if hook.Version != nil && !slices.Contains(supportedHookVersions, *hook.Version) {
		c.err(field.NotSupported(fldPath.Child("version"), *hook.Version, supportedHookVersions))
	}
}

func (c *checker) checkWebhook(wh *metacontroller.Webhook, endpoints []metacontroller.EndpointConfig, fldPath *field.Path) {
	switch {
	case wh.URL == nil && wh.Service == nil:
		// Metacontroller cannot build an address either.
		c.err(field.Required(fldPath, "exactly one of url or service must be set"))
	case wh.URL != nil:
		// Like Metacontroller, a full url overrides service and path, so
		// neither is checked beyond a warning that it is ignored.
		c.checkWebhookURL(*wh.URL, wh, endpoints, fldPath)
		if wh.Service != nil {
			c.warn(fldPath.Child("service"), "ignored because url is set; the hook is called at url, as Metacontroller does")
		}
		if wh.Path != nil {
			c.warn(fldPath.Child("path"), "ignored because url is set; Metacontroller only appends path to a service's address, so put the path in url")
		}
	default:
		c.err(validateServiceReference(wh.Service, fldPath.Child("service"))...)
		// The path is appended to "<protocol>://<name>.<namespace>:<port>";
		// without a leading "/" it would run into the port, and no call
		// could be made, in Metacontroller either.
		if wh.Path != nil && *wh.Path != "" && !strings.HasPrefix(*wh.Path, "/") {
			c.err(field.Invalid(fldPath.Child("path"), *wh.Path, "must start with '/'"))
		}
		if auth := credentialsField(wh.Authorization, wh.BasicAuth); auth != "" && (wh.Service.Protocol == nil || !strings.EqualFold(*wh.Service.Protocol, "https")) {
			c.warn(fldPath.Child("service", "protocol"), "is http while %s is set; the credentials are sent in clear text", fldPath.Child(auth))
		}
	}

	if wh.Timeout != nil {
		// Metacontroller uses any positive timeout as given and replaces
		// any other with its default.
		timeoutPath := fldPath.Child("timeout")
		switch d := wh.Timeout.Duration; {
		case d <= 0:
			c.warn(timeoutPath, "%s is not a positive duration, so the default %s is used, as in Metacontroller", d, defaultHookTimeout)
		case d < shortHookTimeout:
			c.warn(timeoutPath, "%s is under %s; most calls are likely to time out", d, shortHookTimeout)
		case d > longHookTimeout:
			c.warn(timeoutPath, "%s is used as given, but it is over %s: each call holds one of the controller's workers until the hook answers, and the parents queued behind it wait", d, longHookTimeout)
		}
	}

	// An enum in Metacontroller's CRD.
	if wh.ResponseUnMarshallMode != nil && !slices.Contains(supportedUnmarshallModes, *wh.ResponseUnMarshallMode) {
		c.err(field.NotSupported(fldPath.Child("responseUnMarshallMode"), *wh.ResponseUnMarshallMode, supportedUnmarshallModes))
	}

	if wh.Etag != nil {
		// Metacontroller's cache, and this server's, treat a duration
		// under one second as "never".
		etagPath := fldPath.Child("etag")
		if v := wh.Etag.CacheTimeoutSeconds; v != nil && *v < 0 {
			c.warn(etagPath.Child("cacheTimeoutSeconds"), "%d is negative, which means the same as 0: cached answers never expire", *v)
		}
		if v := wh.Etag.CacheCleanupSeconds; v != nil && *v < 0 {
			c.warn(etagPath.Child("cacheCleanupSeconds"), "%d is negative, which means the same as 0: expired answers are never dropped, only replaced", *v)
		}
	}

	c.checkConnection(wh.CABundle, wh.ClientTLS, wh.Authorization, wh.BasicAuth, fldPath)
}

// checkWebhookURL checks that a hook URL can be called. Metacontroller hands
// the URL as it is to Go's HTTP client, and so does this server: what that
// client cannot call is rejected, anything else is accepted. The URL may
// carry credentials, so errors show it redacted, or not at all when it does
// not parse, and warnings never show it.
func (c *checker) checkWebhookURL(raw string, wh *metacontroller.Webhook, endpoints []metacontroller.EndpointConfig, webhookPath *field.Path) {
	fldPath := webhookPath.Child("url")
	if raw == "" {
		c.err(field.Required(fldPath, "must be an absolute http or https URL"))
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL; only its cause is reported.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		c.err(field.Invalid(fldPath, field.OmitValueType{}, fmt.Sprintf("must be a valid URL: %v", err)))
		return
	}
	shown := redactURL(u)

	if !u.IsAbs() {
		// Without a scheme the rest (host, path) cannot be told apart
		// either, so nothing more is worth reporting.
		c.err(field.Invalid(fldPath, shown, "must be an absolute URL with scheme http or https"))
		return
	}
	if !slices.Contains(supportedURLSchemes, strings.ToLower(u.Scheme)) {
		c.err(field.Invalid(fldPath, shown, fmt.Sprintf("scheme %q is not supported: must be http or https", u.Scheme)))
	}
	if u.Host == "" {
		c.err(field.Invalid(fldPath, shown, "must have a host"))
	}
	// A query is sent as it is: nothing to say about it.

	if u.Fragment != "" || strings.Contains(raw, "#") {
		// HTTP clients never send the fragment.
		c.warn(fldPath, "the fragment (from '#' on) is never sent to the hook")
	}

	// Go's HTTP client turns user info into basic credentials, unless the
	// request already has an Authorization header, for Metacontroller as
	// here.
	credentials := credentialsField(wh.Authorization, wh.BasicAuth)
	credentialsPath := webhookPath.Child(credentials)
	if credentials == "" && wh.CABundle == nil && wh.ClientTLS == nil {
		// The webhook's own connection settings replace those of its
		// host's endpointConfig entirely.
		if i, auth := endpointCredentials(endpoints, u); auth != "" {
			credentials = auth
			credentialsPath = field.NewPath("spec", "endpointConfigs").Index(i).Child(auth)
		}
	}
	if u.User != nil {
		if credentials != "" {
			c.warn(fldPath, "contains user info, which is not sent because %s sets the Authorization header", credentialsPath)
		} else {
			c.warn(fldPath, "contains user info, which is sent as basic credentials but can be read by everyone who can read this object; basicAuth keeps them in a Secret")
		}
	}

	// Credentials over plain http can be read by anyone on the path to the
	// hook.
	if strings.EqualFold(u.Scheme, "http") && u.Host != "" && credentials != "" {
		c.warn(fldPath, "uses plain http while %s applies to it; the credentials are sent in clear text", credentialsPath)
	}
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

// endpointCredentials finds the endpointConfig for u's host that has
// credentials, returning its index and the credentials field. Hosts match
// case-insensitively, with or without the scheme's default port, as the
// hook client matches them.
func endpointCredentials(endpoints []metacontroller.EndpointConfig, u *url.URL) (int, string) {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	want := strings.ToLower(net.JoinHostPort(u.Hostname(), port))
	for i := range endpoints {
		host, hostPort, err := net.SplitHostPort(endpoints[i].Host)
		if err != nil {
			host, hostPort = strings.TrimSuffix(strings.TrimPrefix(endpoints[i].Host, "["), "]"), port
		}
		if strings.ToLower(net.JoinHostPort(host, hostPort)) == want {
			return i, credentialsField(endpoints[i].Authorization, endpoints[i].BasicAuth)
		}
	}
	return 0, ""
}

// validateServiceReference checks the service a hook is reached through.
// Metacontroller calls "<protocol>://<name>.<namespace>:<port><path>", so
// each part must be something a Service, and that URL, can have.
func validateServiceReference(svc *metacontroller.ServiceReference, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateDNSLabel(svc.Name, fldPath.Child("name"))...)
	allErrs = append(allErrs, validateDNSLabel(svc.Namespace, fldPath.Child("namespace"))...)
	if svc.Port != nil {
		for _, msg := range utilvalidation.IsValidPortNum(int(*svc.Port)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), *svc.Port, msg))
		}
	}
	// URL schemes are case-insensitive, and Go's HTTP client, which calls
	// the hook for Metacontroller as here, treats them so.
	if svc.Protocol != nil && !slices.Contains(supportedServiceProtocols, strings.ToLower(*svc.Protocol)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("protocol"), *svc.Protocol, supportedServiceProtocols))
	}
	return allErrs
}

// checkConnection checks the connection settings shared by webhooks and
// endpointConfigs. Metacontroller resolves them when it starts a controller
// and does not start it when they fail; these are the failures that can be
// told without reading a Secret.
//
// authorization and basicAuth both set the Authorization header, and
// Metacontroller refuses to choose; setting both is reported as Forbidden at
// basicAuth.
func (c *checker) checkConnection(ca *metacontroller.CABundleConfig, clientTLS *metacontroller.ClientTLSConfig, authz *metacontroller.AuthorizationConfig, basic *metacontroller.BasicAuthConfig, fldPath *field.Path) {
	if ca != nil {
		c.checkCABundle(ca, fldPath.Child("caBundle"))
	}
	if clientTLS != nil {
		tlsPath := fldPath.Child("clientTLS")
		c.err(validateSecretReference(&clientTLS.SecretRef, tlsPath.Child("secretRef"))...)
		c.err(validateOptionalKey(clientTLS.CertKey, tlsPath.Child("certKey"))...)
		c.err(validateOptionalKey(clientTLS.PrivateKeyKey, tlsPath.Child("privateKeyKey"))...)
	}
	if authz != nil {
		c.err(validateAuthorization(authz, fldPath.Child("authorization"))...)
	}
	if basic != nil {
		basicPath := fldPath.Child("basicAuth")
		if authz != nil {
			c.err(field.Forbidden(basicPath, "may not be set together with authorization: both set the Authorization header"))
		}
		c.err(validateSecretReference(&basic.SecretRef, basicPath.Child("secretRef"))...)
		c.err(validateOptionalKey(basic.UsernameKey, basicPath.Child("usernameKey"))...)
		c.err(validateOptionalKey(basic.PasswordKey, basicPath.Child("passwordKey"))...)
	}
}

func (c *checker) checkCABundle(ca *metacontroller.CABundleConfig, fldPath *field.Path) {
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
		c.err(field.Required(fldPath, "exactly one of inline, secretRef or configMapRef must be set"))
	case 1:
	default:
		c.err(field.Invalid(fldPath, strings.Join(set, ", "), "exactly one of inline, secretRef or configMapRef may be set"))
	}

	if ca.Inline != nil {
		c.checkInlineCABundle(*ca.Inline, fldPath.Child("inline"))
	}
	if ca.SecretRef != nil {
		c.err(validateKeyReference(ca.SecretRef, false, fldPath.Child("secretRef"))...)
	}
	if ca.ConfigMapRef != nil {
		c.err(validateKeyReference(ca.ConfigMapRef, false, fldPath.Child("configMapRef"))...)
	}
}

// checkInlineCABundle checks that an inline bundle holds a certificate Go's
// TLS stack can use. Like x509.CertPool.AppendCertsFromPEM, which loads the
// bundle for Metacontroller as here, it skips other PEM blocks and
// certificates that do not parse, and fails only when nothing is left.
func (c *checker) checkInlineCABundle(bundle string, fldPath *field.Path) {
	certs, good := 0, 0
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
			c.warn(fldPath, "certificate %d does not parse and is ignored: %v", certs, err)
			continue
		}
		good++
	}
	switch {
	case certs == 0:
		c.err(field.Invalid(fldPath, field.OmitValueType{}, "must contain at least one PEM-encoded CERTIFICATE block"))
	case good == 0:
		c.err(field.Invalid(fldPath, field.OmitValueType{}, "none of its certificates parses"))
	}
}

func validateAuthorization(authz *metacontroller.AuthorizationConfig, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	// An empty type is defaulted to Bearer. Surrounding spaces are
	// trimmed when the header is built, here as in Metacontroller.
	if typ := strings.TrimSpace(authz.Type); authz.Type != "" {
		typePath := fldPath.Child("type")
		switch {
		case strings.EqualFold(typ, "Basic"):
			// Metacontroller refuses it too: basicAuth builds the base64
			// "user:password" credential itself.
			allErrs = append(allErrs, field.Invalid(typePath, authz.Type, "may not be \"Basic\": use basicAuth instead"))
		case !httpguts.ValidHeaderFieldName(typ):
			// An authentication scheme is a token (RFC 9110), as a header name is.
			// The scheme is written into the Authorization header as is.
			allErrs = append(allErrs, field.Invalid(typePath, authz.Type, "must be an HTTP authentication scheme such as \"Bearer\": letters, digits and !#$%&'*+-.^_`|~ only"))
		}
	}
	allErrs = append(allErrs, validateKeyReference(&authz.SecretRef, true, fldPath.Child("secretRef"))...)
	return allErrs
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

func (c *checker) checkEndpointConfigs(configs []metacontroller.EndpointConfig, fldPath *field.Path) {
	first := make(map[string]int, len(configs))
	for i := range configs {
		ec := &configs[i]
		idxPath := fldPath.Index(i)
		hostPath := idxPath.Child("host")
		if ec.Host == "" {
			// host is required in Metacontroller's CRD.
			c.err(field.Required(hostPath, "a host or host:port, e.g. \"my-hook.my-ns:8443\""))
		} else {
			// Metacontroller compares host with each hook URL's host and
			// ignores entries that match none.
			for _, e := range validateEndpointHost(ec.Host, hostPath) {
				c.warn(hostPath, "%s; it can never match a hook's host, so this entry is never used", e.Detail)
			}
			// Hosts are matched case-insensitively and the first match
			// wins, here as in Metacontroller.
			key := strings.ToLower(ec.Host)
			if j, ok := first[key]; ok {
				c.warn(hostPath, "%q is also the host of %s, which is used instead, so this entry is never used", ec.Host, fldPath.Index(j))
			} else {
				first[key] = i
			}
		}
		c.checkConnection(ec.CABundle, ec.ClientTLS, ec.Authorization, ec.BasicAuth, idxPath)
	}
}

// validateEndpointHost checks that host is what a hook URL's host part can
// be: a DNS name or an IP address (IPv6 in brackets), optionally with a
// port. Anything else, a scheme or a path say, matches no hook.
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
