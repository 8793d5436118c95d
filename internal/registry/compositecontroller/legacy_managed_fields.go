package compositecontroller

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// translateLegacyManagedFields makes managedFields name the fields an object
// written in Metacontroller's earliest shape was stored in. Server-side
// apply records the fields of the applied configuration as sent
// (spec.clientConfig, spec.hooks.sync.path, a childResources entry keyed by
// apiVersion alone); those are converted away and never stored. Left so,
// the applier would own fields that do not exist and none of those that
// do: an entry removed from its resources list would never be pruned, and
// the stored fields would stay beside the applied ones on every apply.
// Rewritten, the applier owns what the conversion made of its fields, and
// applying the same manifest again prunes and re-creates exactly those.
func translateLegacyManagedFields(cc *metacontroller.CompositeController) {
	l := cc.LegacyShape
	if l == nil {
		return
	}
	for i := range cc.ManagedFields {
		entry := &cc.ManagedFields[i]
		if entry.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(entry.FieldsV1.Raw)); err != nil {
			// Not ours to repair: the field manager wrote it.
			continue
		}
		translated, changed := translateLegacyPaths(set, l)
		if !changed {
			continue
		}
		raw, err := translated.ToJSON()
		if err != nil {
			continue
		}
		entry.FieldsV1 = &metav1.FieldsV1{Raw: raw}
	}
}

// translateLegacyPaths returns set with each path of the earliest shape
// replaced by the paths it was converted into, and whether any was.
func translateLegacyPaths(set *fieldpath.Set, l *metacontroller.LegacyShape) (*fieldpath.Set, bool) {
	out := fieldpath.NewSet()
	changed := false
	set.Iterate(func(p fieldpath.Path) {
		translated, ok := translateLegacyPath(p, l)
		if !ok {
			out.Insert(p)
			return
		}
		changed = true
		for _, t := range translated {
			out.Insert(t)
		}
	})
	return out, changed
}

var (
	specField           = fieldpath.FieldNameElement("spec")
	clientConfigField   = fieldpath.FieldNameElement("clientConfig")
	updateStrategyField = fieldpath.FieldNameElement("updateStrategy")
	hooksField          = fieldpath.FieldNameElement("hooks")
	childResourcesField = fieldpath.FieldNameElement("childResources")
)

// translateLegacyPath returns what one path of the earliest shape became,
// none if it became nothing, and false if p is not of that shape.
func translateLegacyPath(p fieldpath.Path, l *metacontroller.LegacyShape) ([]fieldpath.Path, bool) {
	if len(p) < 2 || !p[0].Equals(specField) {
		return nil, false
	}
	switch {
	case p[1].Equals(clientConfigField):
		// spec.clientConfig.service[.x] -> spec.hooks.<h>.webhook.service[.x]
		// of every hook given by path; spec.clientConfig itself is gone.
		if len(p) < 3 {
			return nil, true
		}
		var out []fieldpath.Path
		for _, h := range l.HooksByPath {
			out = append(out, join(fieldpath.MakePathOrDie("spec", "hooks", h, "webhook"), p[2:]))
		}
		return out, true
	case p[1].Equals(updateStrategyField):
		return nil, true
	case p[1].Equals(hooksField) && len(p) == 4 && p[3].FieldName != nil && *p[3].FieldName == "path" && p[2].FieldName != nil:
		// spec.hooks.<h>.path -> spec.hooks.<h>.webhook.path
		for _, h := range l.HooksByPath {
			if h == *p[2].FieldName {
				return []fieldpath.Path{fieldpath.MakePathOrDie("spec", "hooks", h, "webhook", "path")}, true
			}
		}
	case p[1].Equals(childResourcesField) && len(p) >= 3 && p[2].Key != nil:
		// spec.childResources[apiVersion=v,resource=""][.x] ->
		// spec.childResources[apiVersion=v,resource=r][.x] for each r, and
		// its resources -> resource.
		apiVersion, ok := legacyEntryKey(*p[2].Key)
		if !ok {
			return nil, false
		}
		resources, ok := l.ChildResources[apiVersion]
		if !ok {
			return nil, false
		}
		rest := p[3:]
		if len(rest) > 0 && rest[0].FieldName != nil && *rest[0].FieldName == "resources" {
			rest = fieldpath.MakePathOrDie("resource")
		}
		var out []fieldpath.Path
		for _, r := range resources {
			item := fieldpath.Path{specField, childResourcesField, fieldpath.KeyElementByFields("apiVersion", apiVersion, "resource", r)}
			out = append(out, join(item, rest))
		}
		return out, true
	}
	return nil, false
}

func join(prefix, rest fieldpath.Path) fieldpath.Path {
	return append(append(fieldpath.Path{}, prefix...), rest...)
}

// legacyEntryKey returns the apiVersion of a childResources entry's key
// when the entry names no resource, as one listing resources does: the key
// field resource is then "" (its schema default) or absent.
func legacyEntryKey(key value.FieldList) (string, bool) {
	apiVersion := ""
	for _, f := range key {
		switch {
		case f.Name == "apiVersion" && f.Value.IsString():
			apiVersion = f.Value.AsString()
		case f.Name == "resource" && f.Value.IsString() && f.Value.AsString() == "":
		default:
			return "", false
		}
	}
	return apiVersion, apiVersion != ""
}
