// Package patches runs a CompositeController's spec.hooks.patches over the
// desired children of one parent, as Cluster API's patch engine runs a
// ClusterClass's patches over a Cluster's templates: an ordered pipeline of
// generators behind one interface (hookapi.Generator), each given the
// children as the generators before it left them, each answering a JSON
// patch or JSON merge patch per child, applied in order.
//
// A generator is a patch hook over HTTP (internal/hooks), inline JSON patches
// (NewInline) or Go code. enabledIf, a CEL expression over the builtin
// variables, decides per parent whether a patch runs. A generator's answer
// is applied with evanphx/json-patch (RFC 6902 JSON patches, RFC 7386 merge
// patches); inline patches are applied in the process, without encoding
// anything, with the same result (strictly RFC 6902: a replace needs its
// target).
//
// Like the sync engine, the pipeline is all or nothing: a generator that
// fails, or answers anything that can't be applied as the contract says, fails
// the whole run, and no patched child is returned at all.
package patches

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// Step is one patch of the pipeline.
type Step struct {
	// Name is the patch's name, spec.hooks.patches[].name.
	Name string
	// EnabledIf decides whether the patch runs for a parent; nil runs it
	// always.
	EnabledIf *variables.Condition
	// Generator computes the patches.
	Generator hookapi.Generator
}

// Pipeline is the patches of one controller, ready to run. It is built
// once per definition of the controller from what internal/definition compiled
// (enabledIf, templates) and is safe for concurrent use.
type Pipeline struct {
	steps []Step
}

// New returns a pipeline running steps in order.
func New(steps ...Step) *Pipeline {
	return &Pipeline{steps: steps}
}

// Steps are the pipeline's steps, in order.
func (p *Pipeline) Steps() []Step {
	if p == nil {
		return nil
	}
	return p.steps
}

// Input is what one run patches.
type Input struct {
	// Controller and Generation are builtin.controller.
	Controller string
	Generation int64
	// Parent gives builtin.parent. It is not modified.
	Parent *unstructured.Unstructured
	// Children are the desired children, each with apiVersion, kind and
	// metadata.name, unique. They are not modified.
	Children []*unstructured.Unstructured
}

// Result is the outcome of a run.
type Result struct {
	// Children are the patched children, in the order of Input.Children:
	// new objects for the children a patch changed, Input's own objects
	// for the others, so that a child is changed if and only if it is not
	// the object it was.
	Children []*unstructured.Unstructured
	// Steps say what each patch did, in order.
	Steps []StepResult
}

// StepResult is what one patch did.
type StepResult struct {
	Name string
	// Skipped is true when the patch did not run; Reason says why.
	Skipped bool
	Reason  string
	// Request is what the generator was given: the exact request a patch
	// hook was sent. Nil when skipped, and for inline patches, which the
	// pipeline applies in the process without one.
	Request *hookapi.GenerateRequest
	// Duration is the time the generator took, applying its answer
	// included.
	Duration time.Duration
	// Changes are the children the patch changed, in the order of
	// Input.Children.
	Changes []Change
	// Children are the children as the patch left them, in the order of
	// Input.Children; nil when skipped. A child the patch did not change is
	// the same object as before it.
	Children []*unstructured.Unstructured
}

// Change is what a patch changed in one child.
type Change struct {
	Ref hookapi.ObjectRef
	// Diff lists the changed fields, one a line, as internal/engine's plan items
	// do: `path: old -> new`, `path: <none> -> new`, `- path: old`.
	Diff []string
}

// StepError is a patch that failed: its enabledIf could not be evaluated,
// its generator failed, or its answer can't be applied. Nothing of the run
// is used.
type StepError struct {
	// Patch is the patch's name.
	Patch string
	Err   error
}

func (e *StepError) Error() string { return fmt.Sprintf("patch %q: %v", e.Patch, e.Err) }

func (e *StepError) Unwrap() error { return e.Err }

// InvalidAnswerError is a generator's answer that breaks the contract:
// unknown or repeated uids, an unknown patchType, a patch that does not
// apply, or one that would rename a child or change its kind. Problems
// lists them all.
type InvalidAnswerError struct {
	Problems []string
}

func (e *InvalidAnswerError) Error() string {
	return "the answer is invalid: " + strings.Join(e.Problems, "; ")
}

// Run runs the pipeline over in's children. On any error it returns
// (nil, err), err a *StepError naming the patch: a partly patched set of
// children is never returned.
func (p *Pipeline) Run(ctx context.Context, in Input) (*Result, error) {
	res := &Result{Children: append([]*unstructured.Unstructured(nil), in.Children...)}
	if p == nil {
		return res, nil
	}
	vars := variables.ForParent(in.Controller, in.Generation, in.Parent)
	values := variables.ToValues(vars)
	refs := make([]hookapi.ObjectRef, len(in.Children))
	uids := make(map[string]int, len(in.Children))
	for i, child := range in.Children {
		refs[i] = refOf(child)
		uid := UID(refs[i])
		if _, dup := uids[uid]; dup {
			return nil, fmt.Errorf("child %s is given twice", describeRef(refs[i]))
		}
		uids[uid] = i
	}
	for _, step := range p.steps {
		sr := StepResult{Name: step.Name}
		if step.EnabledIf != nil {
			enabled, err := step.EnabledIf.Eval(ctx, values)
			if err != nil {
				return nil, &StepError{Patch: step.Name, Err: err}
			}
			if !enabled {
				sr.Skipped, sr.Reason = true, fmt.Sprintf("enabledIf is false: %s", step.EnabledIf)
				res.Steps = append(res.Steps, sr)
				continue
			}
		}
		if len(res.Children) == 0 {
			sr.Skipped, sr.Reason = true, "there are no desired children"
			res.Steps = append(res.Steps, sr)
			continue
		}
		start := time.Now()
		var (
			next    []*unstructured.Unstructured
			changes []Change
			err     error
		)
		if g, ok := step.Generator.(*inline); ok {
			// Our own code: no request to build, nothing to encode.
			next, changes, err = g.patch(values, res.Children, refs)
		} else {
			// Each generator gets its own copies: one that changes what
			// it was given changes neither the children nor the next
			// one's request.
			req := &hookapi.GenerateRequest{
				Variables: variables.ForParent(in.Controller, in.Generation, in.Parent),
				Items:     make([]*hookapi.GenerateRequestItem, len(res.Children)),
			}
			for i, child := range res.Children {
				req.Items[i] = &hookapi.GenerateRequestItem{
					UID:       UID(refs[i]),
					Ref:       refs[i],
					Variables: variables.ForChild(refs[i]),
					Object:    child.DeepCopy(),
				}
			}
			sr.Request = req
			var resp *hookapi.GenerateResponse
			if resp, err = step.Generator.Generate(ctx, req); err != nil {
				return nil, &StepError{Patch: step.Name, Err: err}
			}
			next, changes, err = apply(res.Children, refs, uids, resp)
		}
		sr.Duration = time.Since(start)
		if err != nil {
			return nil, &StepError{Patch: step.Name, Err: err}
		}
		res.Children, sr.Changes, sr.Children = next, changes, next
		res.Steps = append(res.Steps, sr)
	}
	return res, nil
}

// UID is the uid of a child in a patch request: opaque, the same for the
// same child in every request, and distinct for distinct children.
func UID(ref hookapi.ObjectRef) string {
	sum := sha256.Sum256([]byte(ref.APIVersion + "\x00" + ref.Kind + "\x00" + ref.Namespace + "\x00" + ref.Name))
	return hex.EncodeToString(sum[:10])
}

func refOf(obj *unstructured.Unstructured) hookapi.ObjectRef {
	return hookapi.ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// describeRef names a child as internal/engine does: Kind.apiVersion namespace/name.
func describeRef(ref hookapi.ObjectRef) string {
	name := ref.Name
	if ref.Namespace != "" {
		name = ref.Namespace + "/" + ref.Name
	}
	return ref.Kind + "." + ref.APIVersion + " " + name
}
