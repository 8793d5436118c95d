package v1alpha1

import (
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// Metacontroller's earliest CompositeController shape lists several child
// resources in one entry (childResources[].resources), names the hooks'
// Service once (spec.clientConfig.service) and gives each hook as a path on
// it (hooks.sync.path), with a spec-wide updateStrategy "Apply". Those
// fields exist only here, in v1alpha1: the conversion to the internal type
// moves them into today's fields, as Kubernetes converts a deprecated
// field, and the conversion back never writes them, so an object is stored
// and served in today's shape only.

// Convert_v1alpha1_CompositeController_To_metacontroller_CompositeController
// converts an object and, when it is written in Metacontroller's earliest
// shape, moves that shape into today's fields and records what it did for
// the strategy to answer.
func Convert_v1alpha1_CompositeController_To_metacontroller_CompositeController(in *CompositeController, out *metacontroller.CompositeController, s conversion.Scope) error {
	if err := autoConvert_v1alpha1_CompositeController_To_metacontroller_CompositeController(withoutHookPaths(in), out, s); err != nil {
		return err
	}
	legacy, err := convertLegacyShape(&in.Spec, &out.Spec, s)
	if err != nil {
		return err
	}
	out.LegacyShape = legacy
	return nil
}

// Convert_metacontroller_CompositeController_To_v1alpha1_CompositeController
// converts an object; the record of a conversion from the earliest shape
// belongs to one request and is never written.
func Convert_metacontroller_CompositeController_To_v1alpha1_CompositeController(in *metacontroller.CompositeController, out *CompositeController, s conversion.Scope) error {
	return autoConvert_metacontroller_CompositeController_To_v1alpha1_CompositeController(in, out, s)
}

// Convert_v1alpha1_CompositeControllerSpec_To_metacontroller_CompositeControllerSpec
// converts today's fields; clientConfig and updateStrategy are the object's
// conversion's to handle, as only it can record what it did.
func Convert_v1alpha1_CompositeControllerSpec_To_metacontroller_CompositeControllerSpec(in *CompositeControllerSpec, out *metacontroller.CompositeControllerSpec, s conversion.Scope) error {
	return autoConvert_v1alpha1_CompositeControllerSpec_To_metacontroller_CompositeControllerSpec(in, out, s)
}

// Convert_v1alpha1_CompositeControllerChildResourceRule_To_metacontroller_CompositeControllerChildResourceRule
// converts today's fields; resources is the object's conversion's to
// handle, as one entry becomes several.
func Convert_v1alpha1_CompositeControllerChildResourceRule_To_metacontroller_CompositeControllerChildResourceRule(in *CompositeControllerChildResourceRule, out *metacontroller.CompositeControllerChildResourceRule, s conversion.Scope) error {
	return autoConvert_v1alpha1_CompositeControllerChildResourceRule_To_metacontroller_CompositeControllerChildResourceRule(in, out, s)
}

// Convert_v1alpha1_Hook_To_metacontroller_Hook converts today's fields. A
// path is a CompositeController's conversion's to handle, as it needs
// spec.clientConfig, and it takes it out first; a hook of any other kind
// (they share this type) that has one is refused, never silently dropped.
func Convert_v1alpha1_Hook_To_metacontroller_Hook(in *Hook, out *metacontroller.Hook, s conversion.Scope) error {
	if in.Path != nil {
		return fmt.Errorf("a hook's path (%q) is accepted only in a CompositeController, with spec.clientConfig (Metacontroller's earliest shape): give the hook a webhook with url, or service and path", *in.Path)
	}
	return autoConvert_v1alpha1_Hook_To_metacontroller_Hook(in, out, s)
}

// withoutHookPaths returns cc, or a shallow copy of it whose hooks have no
// path, for the conversion of today's fields; convertLegacyShape converts
// the paths.
func withoutHookPaths(cc *CompositeController) *CompositeController {
	if cc.Spec.Hooks == nil {
		return cc
	}
	hooks := *cc.Spec.Hooks
	changed := false
	for _, h := range []**Hook{&hooks.Customize, &hooks.Sync, &hooks.Finalize, &hooks.PreUpdateChild, &hooks.PostUpdateChild} {
		if *h != nil && (*h).Path != nil {
			without := **h
			without.Path = nil
			*h = &without
			changed = true
		}
	}
	if !changed {
		return cc
	}
	out := *cc
	out.Spec.Hooks = &hooks
	return &out
}

// deprecated prefixes every warning of a conversion, as Kubernetes words
// the warnings of its deprecated fields.
const deprecated = "deprecated (Metacontroller's earliest CompositeController shape)"

// convertLegacyShape moves the earliest shape's fields of in into out,
// already converted from today's fields of in, and returns what it did;
// nil when in has none of them.
func convertLegacyShape(in *CompositeControllerSpec, out *metacontroller.CompositeControllerSpec, s conversion.Scope) (*metacontroller.LegacyShape, error) {
	if !hasLegacyShape(in) {
		// Every stored object, read after read: nothing to do.
		return nil, nil
	}
	l := &metacontroller.LegacyShape{}
	specPath := field.NewPath("spec")
	convertLegacyChildResources(in, out, specPath.Child("childResources"), l)
	if err := convertLegacyHooks(in, out, specPath, l, s); err != nil {
		return nil, err
	}
	if in.UpdateStrategy != nil {
		p := specPath.Child("updateStrategy")
		if *in.UpdateStrategy == LegacyUpdateStrategyApply {
			l.Conversions = append(l.Conversions, fmt.Sprintf("%s: %s: dropped: children are always server-side applied; childResources[].updateStrategy says how they are updated", p, deprecated))
		} else {
			l.Errors = append(l.Errors, field.NotSupported(p, *in.UpdateStrategy, []string{LegacyUpdateStrategyApply}))
		}
	}
	if len(l.Conversions) == 0 && len(l.Errors) == 0 {
		return nil, nil
	}
	return l, nil
}

// hasLegacyShape says whether spec sets a field of the earliest shape.
func hasLegacyShape(spec *CompositeControllerSpec) bool {
	if spec.ClientConfig != nil || spec.UpdateStrategy != nil {
		return true
	}
	for _, r := range spec.ChildResources {
		if r.Resources != nil {
			return true
		}
	}
	if h := spec.Hooks; h != nil {
		for _, hook := range []*Hook{h.Customize, h.Sync, h.Finalize, h.PreUpdateChild, h.PostUpdateChild} {
			if hook != nil && hook.Path != nil {
				return true
			}
		}
	}
	return false
}

// convertLegacyChildResources turns each entry listing resources into one
// entry per resource, in order, each with the entry's update strategy. An
// entry equal to one already there is dropped: a server-side apply of the
// earliest shape over stored entries another field manager owns (and so
// keeps) brings both.
func convertLegacyChildResources(in *CompositeControllerSpec, out *metacontroller.CompositeControllerSpec, path *field.Path, l *metacontroller.LegacyShape) {
	expanded := false
	for _, r := range in.ChildResources {
		expanded = expanded || len(r.Resources) > 0
	}
	if !expanded {
		return
	}
	var result []metacontroller.CompositeControllerChildResourceRule
	fromLegacy := []bool{}
	add := func(r metacontroller.CompositeControllerChildResourceRule, legacy bool) {
		for i := range result {
			if (legacy || fromLegacy[i]) && apiequality.Semantic.DeepEqual(result[i], r) {
				return
			}
		}
		result = append(result, r)
		fromLegacy = append(fromLegacy, legacy)
	}
	for i, r := range in.ChildResources {
		converted := out.ChildResources[i]
		if len(r.Resources) == 0 {
			add(converted, false)
			continue
		}
		p := path.Index(i)
		if r.Resource != "" {
			l.Errors = append(l.Errors, field.Forbidden(p.Child("resources"), fmt.Sprintf("may not be set with %s: give one resource per entry", p.Child("resource"))))
			add(converted, false)
			continue
		}
		if l.ChildResources == nil {
			l.ChildResources = map[string][]string{}
		}
		l.ChildResources[r.APIVersion] = append(l.ChildResources[r.APIVersion], r.Resources...)
		var names []string
		for _, res := range r.Resources {
			one := *converted.DeepCopy()
			one.Resource = res
			add(one, true)
			names = append(names, fmt.Sprintf("{apiVersion: %s, resource: %s}", r.APIVersion, res))
		}
		l.Conversions = append(l.Conversions, fmt.Sprintf("%s: %s: converted into one %s entry per resource: %s", p.Child("resources"), deprecated, path, strings.Join(names, ", ")))
	}
	out.ChildResources = result
}

// convertLegacyHooks turns each hook given by path into a webhook with
// spec.clientConfig.service and that path. A webhook the hook also has may
// agree with it (an apply that merges the stored hook with the earliest
// shape's brings both); a url, another service or another path is recorded
// as a conflict, which validation answers with field errors naming both
// fields unless the webhook is the stored one (metacontroller.
// LegacyHookConflict).
func convertLegacyHooks(in *CompositeControllerSpec, out *metacontroller.CompositeControllerSpec, specPath *field.Path, l *metacontroller.LegacyShape, s conversion.Scope) error {
	var service *ServiceReference
	if in.ClientConfig != nil {
		service = in.ClientConfig.Service
	}
	var byPath, byWebhook []string
	if in.Hooks != nil {
		hooksPath := specPath.Child("hooks")
		for _, h := range []struct {
			name string
			in   *Hook
			out  *metacontroller.Hook
		}{
			{"customize", in.Hooks.Customize, out.Hooks.Customize},
			{"sync", in.Hooks.Sync, out.Hooks.Sync},
			{"finalize", in.Hooks.Finalize, out.Hooks.Finalize},
			{"preUpdateChild", in.Hooks.PreUpdateChild, out.Hooks.PreUpdateChild},
			{"postUpdateChild", in.Hooks.PostUpdateChild, out.Hooks.PostUpdateChild},
		} {
			if h.in == nil {
				continue
			}
			p := hooksPath.Child(h.name)
			if h.in.Path == nil {
				if h.in.Webhook != nil {
					byWebhook = append(byWebhook, p.Child("webhook").String())
				}
				continue
			}
			byPath = append(byPath, p.String())
			if service == nil {
				l.Errors = append(l.Errors, field.Required(specPath.Child("clientConfig", "service"), fmt.Sprintf("the Service of %s", p.Child("path"))))
				continue
			}
			if h.out.Webhook == nil {
				h.out.Webhook = &metacontroller.Webhook{}
			} else if errs := legacyHookConflicts(h.in, service, p, specPath); len(errs) > 0 {
				l.HookConflicts = append(l.HookConflicts, metacontroller.LegacyHookConflict{Hook: h.name, Webhook: h.out.Webhook.DeepCopy(), Errors: errs})
			}
			h.out.Webhook.URL = nil
			h.out.Webhook.Service = &metacontroller.ServiceReference{}
			if err := Convert_v1alpha1_ServiceReference_To_metacontroller_ServiceReference(service, h.out.Webhook.Service, s); err != nil {
				return err
			}
			path := *h.in.Path
			h.out.Webhook.Path = &path
			l.HooksByPath = append(l.HooksByPath, h.name)
			l.Conversions = append(l.Conversions, fmt.Sprintf("%s: %s: converted into %s %q on %s %s/%s",
				p.Child("path"), deprecated, p.Child("webhook", "path"), path, p.Child("webhook", "service"), service.Namespace, service.Name))
		}
	}
	if in.ClientConfig == nil {
		return nil
	}
	p := specPath.Child("clientConfig")
	if len(byPath) == 0 {
		detail := "is used only by hooks given by path (spec.hooks.<hook>.path), and none is"
		if len(byWebhook) > 0 {
			detail += fmt.Sprintf("; %s set: give the Service there as webhook.service", strings.Join(byWebhook, ", "))
		}
		l.Errors = append(l.Errors, field.Forbidden(p, detail))
		return nil
	}
	l.Conversions = append(l.Conversions, fmt.Sprintf("%s: %s: converted into the webhook.service of %s", p, deprecated, strings.Join(byPath, ", ")))
	return nil
}

// legacyHookConflicts says where a hook given by path contradicts the
// webhook it also has.
func legacyHookConflicts(h *Hook, service *ServiceReference, p, specPath *field.Path) field.ErrorList {
	w := h.Webhook
	if w == nil {
		return nil
	}
	var errs field.ErrorList
	if w.URL != nil {
		errs = append(errs, field.Forbidden(p.Child("path"), fmt.Sprintf("may not be set with %s: give the hook as a url or as a path on spec.clientConfig.service", p.Child("webhook", "url"))))
	}
	if w.Service != nil && !sameService(w.Service, service) {
		errs = append(errs, field.Invalid(p.Child("webhook", "service"), fmt.Sprintf("%s/%s", w.Service.Namespace, w.Service.Name),
			fmt.Sprintf("differs from %s (%s/%s), which %s says to use: set one of them", specPath.Child("clientConfig", "service"), service.Namespace, service.Name, p.Child("path"))))
	}
	if w.Path != nil && *w.Path != *h.Path {
		errs = append(errs, field.Invalid(p.Child("path"), *h.Path, fmt.Sprintf("differs from %s %q: set one of them", p.Child("webhook", "path"), *w.Path)))
	}
	return errs
}

// sameService says whether a hook's webhook.service agrees with
// spec.clientConfig.service: each of its fields is unset or the same. A
// field left unset is one a merge (server-side apply pruning what the
// applier owned) did not keep, not one the client chose.
func sameService(w, cc *ServiceReference) bool {
	same := func(a, b string) bool { return a == "" || a == b }
	return same(w.Name, cc.Name) && same(w.Namespace, cc.Namespace) &&
		(w.Port == nil || cc.Port == nil || *w.Port == *cc.Port) &&
		(w.Protocol == nil || cc.Protocol == nil || strings.EqualFold(*w.Protocol, *cc.Protocol))
}
