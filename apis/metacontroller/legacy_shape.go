package metacontroller

import "k8s.io/apimachinery/pkg/util/validation/field"

// LegacyShape is what the conversion from v1alpha1 did to an object written
// in Metacontroller's earliest shape (childResources[].resources,
// spec.clientConfig, hooks given by path, spec.updateStrategy). Those fields
// exist only in v1alpha1, so that strict decoding and OpenAPI accept them;
// the conversion moves them into today's fields and can hand the client
// nothing itself. It records here what the strategy answers: a warning
// naming each conversion, and the field errors of contradictions. The
// record lives only on the internal object of one request: no conversion to
// v1alpha1 writes it, so it is never stored or served.
//
// +k8s:deepcopy-gen=false
type LegacyShape struct {
	// Conversions name each conversion done, one warning each.
	Conversions []string
	// Errors are the deprecated fields that contradict each other or
	// today's fields; the request is refused with them.
	Errors field.ErrorList
	// HookConflicts are the hooks given by path that also have a webhook
	// contradicting it. The path won; whether the request is refused
	// depends on where that webhook came from (see LegacyHookConflict).
	HookConflicts []LegacyHookConflict
	// HooksByPath are the names of the hooks (spec.hooks.<name>) converted
	// from a path on spec.clientConfig.service.
	HooksByPath []string
	// ChildResources are, by apiVersion, the resources of each
	// childResources entry converted from a resources list.
	ChildResources map[string][]string
}

// LegacyHookConflict is a hook given by path on spec.clientConfig.service
// that also has a webhook with a url, another service or another path. On
// create, that is a contradiction. On update, a webhook equal to the stored
// one is what a merge kept from the stored object, not what the client
// wrote: `kubectl apply` of an edited manifest in the earliest shape sends
// the new path and clientConfig in a merge patch, which keeps the stored
// webhook beside them. The path and clientConfig then replace it.
//
// +k8s:deepcopy-gen=false
type LegacyHookConflict struct {
	// Hook is the hook's name in spec.hooks.
	Hook string
	// Webhook is the webhook the hook had beside its path.
	Webhook *Webhook
	// Errors say what contradicts what.
	Errors field.ErrorList
}

// DeepCopyInto copies the record. A field.Error is never changed once
// made, so the copy shares them.
func (in *LegacyShape) DeepCopyInto(out *LegacyShape) {
	out.Conversions = append([]string(nil), in.Conversions...)
	out.Errors = append(field.ErrorList(nil), in.Errors...)
	out.HookConflicts = nil
	for _, c := range in.HookConflicts {
		out.HookConflicts = append(out.HookConflicts, LegacyHookConflict{Hook: c.Hook, Webhook: c.Webhook.DeepCopy(), Errors: append(field.ErrorList(nil), c.Errors...)})
	}
	out.HooksByPath = append([]string(nil), in.HooksByPath...)
	out.ChildResources = nil
	if in.ChildResources != nil {
		out.ChildResources = make(map[string][]string, len(in.ChildResources))
		for k, v := range in.ChildResources {
			out.ChildResources[k] = append([]string(nil), v...)
		}
	}
}

// DeepCopy returns a copy of the record.
func (in *LegacyShape) DeepCopy() *LegacyShape {
	if in == nil {
		return nil
	}
	out := new(LegacyShape)
	in.DeepCopyInto(out)
	return out
}

// TakeLegacyShape returns the record of an object's conversion from
// Metacontroller's earliest shape, nil if none, and removes it, so that it
// is answered once.
func (cc *CompositeController) TakeLegacyShape() *LegacyShape {
	l := cc.LegacyShape
	cc.LegacyShape = nil
	return l
}
