package validation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// Expressions compiles what patches carry: enabledIf in CEL, variable paths
// and Go templates. The patch engine's own compiler implements it
// (internal/apicheck.Expressions), so that validation accepts exactly
// what the engine runs, while apis/ imports nothing from pkg/.
type Expressions interface {
	// CheckCondition compiles an enabledIf expression as a new one.
	CheckCondition(expr string) error
	// CheckChildVariable checks that path names a variable a child's
	// patch can read.
	CheckChildVariable(path string) error
	// CheckTemplate parses a valueFrom.template.
	CheckTemplate(text string) error
	// CheckHealthCondition compiles a rollout's health condition as a
	// new one.
	CheckHealthCondition(expr string) error
	// EstimateHealthCondition compiles a health condition as a new one
	// with the parent typed by its resource's OpenAPI schema, and
	// estimates the cost of one evaluation: max in the worst case the
	// schema allows, typical with the lists and maps it does not bound
	// sized as on a typical parent; dynamic tells whether the estimate met
	// a part of the parent the schema leaves open, which no estimate
	// bounds.
	EstimateHealthCondition(expr string, parent *spec.Schema) (max, typical uint64, dynamic bool, err error)
}

var supportedJSONPatchOps = []metacontroller.JSONPatchOp{
	metacontroller.JSONPatchOpAdd,
	metacontroller.JSONPatchOpReplace,
	metacontroller.JSONPatchOpRemove,
}

// identityPointers are the JSON pointers a patch may not touch: the patch
// engine refuses any change of a child's apiVersion, kind, name or
// namespace, so an inline patch at one of them could never apply.
var identityPointers = []string{"/apiVersion", "/kind", "/metadata", "/metadata/name", "/metadata/namespace"}

// checkPatches checks spec.hooks.patches. They are this server's own, so
// nothing has to be accepted for Metacontroller's sake: what the patch
// engine could not run is rejected, with the compile errors of enabledIf and
// of templates, and unknown variables, reported now rather than on every
// sync.
func (c *checker) checkPatches(patches []metacontroller.PatchHook, endpoints []metacontroller.EndpointConfig, fldPath *field.Path) {
	first := make(map[string]bool, len(patches))
	for i := range patches {
		p := &patches[i]
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		if p.Name == "" {
			c.err(field.Required(namePath, "names the patch in errors, Events, metrics and previews"))
		} else {
			// The name is a metric label value and part of messages.
			for _, msg := range utilvalidation.IsValidLabelValue(p.Name) {
				c.err(field.Invalid(namePath, p.Name, msg))
			}
			if first[p.Name] {
				c.err(field.Duplicate(namePath, p.Name))
			}
			first[p.Name] = true
		}

		if p.EnabledIf != nil {
			enabledPath := idxPath.Child("enabledIf")
			if strings.TrimSpace(*p.EnabledIf) == "" {
				c.err(field.Invalid(enabledPath, *p.EnabledIf, "must be a CEL expression; leave enabledIf unset for a patch that always runs"))
			} else if err := c.exprs.CheckCondition(*p.EnabledIf); err != nil {
				c.err(field.Invalid(enabledPath, *p.EnabledIf, err.Error()))
			}
		}

		switch {
		case p.Webhook != nil && len(p.Definitions) > 0:
			c.err(field.Forbidden(idxPath.Child("definitions"), "may not be set together with webhook: a patch is a patch hook or inline patches"))
		case p.Webhook == nil && len(p.Definitions) == 0:
			c.err(field.Required(idxPath, "exactly one of webhook or definitions must be set"))
		}
		if p.Webhook != nil {
			webhookPath := idxPath.Child("webhook")
			c.checkWebhook(p.Webhook, endpoints, webhookPath)
			if p.Webhook.Etag != nil {
				c.warn(webhookPath.Child("etag"), "ignored: a patch hook's answer depends on the desired children, not only on the parent ETags are kept for, so patch hooks are always called")
			}
		}
		for j := range p.Definitions {
			c.checkPatchDefinition(&p.Definitions[j], idxPath.Child("definitions").Index(j))
		}
	}
}

func (c *checker) checkPatchDefinition(d *metacontroller.PatchDefinition, fldPath *field.Path) {
	selPath := fldPath.Child("selector")
	c.err(validateAPIVersion(d.Selector.APIVersion, selPath.Child("apiVersion"))...)
	kindPath := selPath.Child("kind")
	if d.Selector.Kind == "" {
		c.err(field.Required(kindPath, "the kind of the children to patch, e.g. \"Deployment\""))
	} else {
		// As CustomResourceDefinition validation checks a kind.
		for _, msg := range utilvalidation.IsDNS1035Label(strings.ToLower(d.Selector.Kind)) {
			c.err(field.Invalid(kindPath, d.Selector.Kind, msg))
		}
	}
	if d.Selector.Name != "" {
		for _, msg := range path.IsValidPathSegmentName(d.Selector.Name) {
			c.err(field.Invalid(selPath.Child("name"), d.Selector.Name, msg))
		}
	}

	patchesPath := fldPath.Child("jsonPatches")
	if len(d.JSONPatches) == 0 {
		c.err(field.Required(patchesPath, "at least one operation"))
	}
	for i := range d.JSONPatches {
		c.checkJSONPatch(&d.JSONPatches[i], patchesPath.Index(i))
	}
}

func (c *checker) checkJSONPatch(p *metacontroller.JSONPatch, fldPath *field.Path) {
	if !slices.Contains(supportedJSONPatchOps, p.Op) {
		c.err(field.NotSupported(fldPath.Child("op"), p.Op, supportedJSONPatchOps))
	}
	pathPath := fldPath.Child("path")
	switch {
	case p.Path == "":
		c.err(field.Required(pathPath, "a JSON pointer into the child, e.g. \"/spec/replicas\""))
	case slices.Contains(identityPointers, p.Path):
		c.err(field.Forbidden(pathPath, "a patch may not change a child's apiVersion, kind, name or namespace"))
	default:
		if msg := checkJSONPointer(p.Path, p.Op == metacontroller.JSONPatchOpAdd); msg != "" {
			c.err(field.Invalid(pathPath, p.Path, msg))
		}
	}

	valuePath, fromPath := fldPath.Child("value"), fldPath.Child("valueFrom")
	if p.Op == metacontroller.JSONPatchOpRemove {
		if p.Value != nil {
			c.err(field.Forbidden(valuePath, "remove takes no value"))
		}
		if p.ValueFrom != nil {
			c.err(field.Forbidden(fromPath, "remove takes no value"))
		}
		return
	}
	switch {
	case p.Value != nil && p.ValueFrom != nil:
		c.err(field.Forbidden(fromPath, "may not be set together with value"))
	case p.Value == nil && p.ValueFrom == nil && p.Op != "":
		c.err(field.Required(valuePath, fmt.Sprintf("%s needs value or valueFrom", p.Op)))
	}
	if p.Value != nil && !json.Valid(p.Value.Raw) {
		c.err(field.Invalid(valuePath, string(p.Value.Raw), "must be a JSON value"))
	}
	if p.ValueFrom == nil {
		return
	}
	variable, template := p.ValueFrom.Variable, p.ValueFrom.Template
	switch {
	case variable != nil && template != nil:
		c.err(field.Forbidden(fromPath.Child("template"), "may not be set together with variable"))
	case variable == nil && template == nil:
		c.err(field.Required(fromPath, "exactly one of variable or template must be set"))
	}
	if variable != nil {
		if err := c.exprs.CheckChildVariable(*variable); err != nil {
			c.err(field.Invalid(fromPath.Child("variable"), *variable, err.Error()))
		}
	}
	if template != nil {
		if err := c.exprs.CheckTemplate(*template); err != nil {
			c.err(field.Invalid(fromPath.Child("template"), *template, err.Error()))
		}
	}
}

// checkJSONPointer says what makes p no RFC 6901 JSON pointer usable in a
// patch, or "": it starts with '/', '~' only escapes '0' or '1', and "-"
// (the end of a list) is only the last token of an add.
func checkJSONPointer(p string, add bool) string {
	if !strings.HasPrefix(p, "/") {
		return "must be a JSON pointer, starting with '/', e.g. \"/spec/replicas\""
	}
	tokens := strings.Split(p[1:], "/")
	for i, tok := range tokens {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
				return "'~' must be followed by '0' (for '~') or '1' (for '/')"
			}
		}
		if tok == "-" && (!add || i != len(tokens)-1) {
			return "\"-\" (after the last element of a list) may only end the path of an add"
		}
	}
	return ""
}
