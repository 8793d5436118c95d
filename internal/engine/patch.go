package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// HookPatches names spec.hooks.patches as a whole in InvalidResponseError.Hook.
const HookPatches = "patches"

// patch runs spec.hooks.patches over the validated desired children, in
// order, and returns the children they leave, checked as a sync hook's
// answer is (validate): a patch can break a child as a hook can, with
// labels that no longer match the selector, say. Identity can't change: the
// pipeline refuses patches that rename a child or change its kind, so the
// children stay the ones the hook returned, in the same order. Any failure
// is the whole sync's: no plan.
//
// During a rolling update it runs once per revision, with the parent as it
// was at that revision; the plan records the steps of the latest, the
// parent as it is.
func (c *computation) patch(ctx context.Context, parent *unstructured.Unstructured, desired []desiredChild) ([]desiredChild, error) {
	if len(c.in.Definition.Hooks.Patches) == 0 {
		return desired, nil
	}
	name := c.in.Definition.Name
	if c.in.Hooks.Patches == nil {
		// Applying the children unpatched would undo what the patches did
		// to them before.
		return nil, fmt.Errorf("CompositeController %q declares patches, but they are not available here", name)
	}
	if !c.in.Definition.ManagesChildren(c.in.Parent) {
		// Nothing desired is applied: the children are left to the garbage
		// collector.
		return desired, nil
	}
	children := make([]*unstructured.Unstructured, len(desired))
	for i, d := range desired {
		children[i] = d.obj
	}
	start := time.Now()
	res, err := c.in.Hooks.Patches.Run(ctx, patches.Input{
		Controller: name,
		Generation: c.in.Definition.Generation,
		Parent:     parent,
		Children:   children,
	})
	c.plan.PatchesDuration += time.Since(start)
	if err != nil {
		var step *patches.StepError
		var invalid *patches.InvalidAnswerError
		if errors.As(err, &step) && errors.As(err, &invalid) {
			return nil, &InvalidResponseError{Controller: name, Hook: definition.PatchHookName(step.Patch), Problems: invalid.Problems}
		}
		// A *patches.StepError: "patch "<name>": ...", as a failed sync
		// hook call is "sync hook: ...".
		return nil, err
	}

	// The children the patches changed are new objects; the others are
	// validated already.
	out := append([]desiredChild(nil), desired...)
	var changed []*unstructured.Unstructured
	index := map[string]int{}
	for i, obj := range res.Children {
		if obj != children[i] {
			changed = append(changed, obj)
			index[ChildKey(obj)] = i
		}
	}
	if len(changed) > 0 {
		valid, err := c.validate(HookPatches, &hookapi.SyncHookResponse{Children: changed})
		if err != nil {
			return nil, c.blame(res, children, err)
		}
		for _, d := range valid {
			out[index[ChildKey(d.obj)]] = d
		}
	}
	if parent == c.in.Parent {
		c.plan.Patches = res.Steps
	}
	return out, nil
}

// blame names the patch whose result is invalid: the first whose changed
// children fail validation. What the patches leave is what counts (a later
// patch may repair what an earlier one broke), so this runs only once that
// failed.
func (c *computation) blame(res *patches.Result, children []*unstructured.Unstructured, err error) error {
	for _, step := range res.Steps {
		var changed []*unstructured.Unstructured
		for i, obj := range step.Children {
			if obj != children[i] {
				changed = append(changed, obj)
			}
		}
		if len(changed) == 0 {
			continue
		}
		if _, stepErr := c.validate(definition.PatchHookName(step.Name), &hookapi.SyncHookResponse{Children: changed}); stepErr != nil {
			return stepErr
		}
		children = step.Children
	}
	return err
}
