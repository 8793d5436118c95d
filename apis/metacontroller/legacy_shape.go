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
}

// DeepCopyInto copies the record. A field.Error is never changed once
// made, so the copy shares them.
func (in *LegacyShape) DeepCopyInto(out *LegacyShape) {
	out.Conversions = append([]string(nil), in.Conversions...)
	out.Errors = append(field.ErrorList(nil), in.Errors...)
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
