package engine

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// What is DecoratorController's own in the engine: its hook's request and
// answer, which carry the decorated object and its attachments where a
// CompositeController's carry the parent and its children, and the labels
// and annotations its answer sets on the object. Everything else (claim,
// validation of the attachments, the plan) is the engine's shared code,
// with the object as the parent and the attachments as its children.

// DecoratorHook is a DecoratorController's sync or finalize hook as the
// engine calls it: it answers and says the exact request body it sent
// (*hooks.Webhook); nil when it sent none.
type DecoratorHook interface {
	DecorateSent(ctx context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, []byte, error)
}

// DecoratorHooks are a DecoratorController's hooks that take a decorator's
// request, in Hooks.Decorator.
type DecoratorHooks struct {
	// Sync is required for a DecoratorController.
	Sync DecoratorHook
	// Finalize is called instead of Sync while the object is being
	// deleted, or no longer selected. Optional.
	Finalize DecoratorHook
}

// InProcessDecorator makes a decorator hook that runs in this process (Go
// code, tests), and so sends no body, a DecoratorHook; nil stays nil.
func InProcessDecorator(h hookapi.DecoratorHook) DecoratorHook {
	if h == nil {
		return nil
	}
	return inProcessDecorator{h}
}

type inProcessDecorator struct{ hookapi.DecoratorHook }

func (h inProcessDecorator) DecorateSent(ctx context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, []byte, error) {
	// As InProcess: Go code gets copies of the caller's objects.
	resp, err := h.Decorate(ctx, req.DeepCopy())
	if err != nil || resp == nil {
		return resp, nil, err
	}
	answer := *resp
	answer.Status = asDecodedJSON(resp.Status)
	answer.Attachments = asDecodedObjects(resp.Attachments)
	return &answer, nil, nil
}

// Decoration is what a DecoratorController's answer sets on the object
// besides its status: labels and annotations, a nil value removing one.
type Decoration struct {
	Labels      map[string]*string
	Annotations map[string]*string
}

// callHook calls the sync or finalize hook in the shape of the controller's
// kind: a DecoratorController's hook gets the decorated object and its
// attachments, and its answer is read as a CompositeController's would be
// (status, attachments as children, resync, finalized), its labels and
// annotations kept in the plan's Decoration.
func (c *computation) callHook(ctx context.Context, h chosenHook, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, []byte, error) {
	def := c.in.Definition
	if def.Kind != definition.KindDecorator {
		return h.sync.SyncSent(ctx, req)
	}
	resp, sent, err := h.decorator.DecorateSent(ctx, &hookapi.DecoratorHookRequest{
		Controller:  def.Decorator,
		Object:      req.Parent,
		Attachments: req.Children,
		Related:     req.Related,
		Finalizing:  req.Finalizing,
	})
	if err != nil || resp == nil {
		return nil, sent, err
	}
	if problems := decorationProblems(resp); len(problems) > 0 {
		return nil, sent, &InvalidResponseError{Kind: def.Kind, Controller: def.Name, Hook: h.name, Problems: problems}
	}
	c.plan.Decoration = &Decoration{Labels: resp.Labels, Annotations: resp.Annotations}
	return &hookapi.SyncHookResponse{
		Status:             resp.Status,
		Children:           resp.Attachments,
		ResyncAfterSeconds: resp.ResyncAfterSeconds,
		Finalized:          resp.Finalized,
	}, sent, nil
}

// decorationProblems are the labels and annotations of an answer that the
// API server would refuse on the object, each named, sorted.
func decorationProblems(resp *hookapi.DecoratorHookResponse) []string {
	var problems []string
	for k, v := range resp.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			problems = append(problems, fmt.Sprintf("labels: key %q: %s", k, msg))
		}
		if v != nil {
			for _, msg := range validation.IsValidLabelValue(*v) {
				problems = append(problems, fmt.Sprintf("labels: value %q of %q: %s", *v, k, msg))
			}
		}
	}
	for k := range resp.Annotations {
		for _, msg := range validation.IsQualifiedName(k) {
			problems = append(problems, fmt.Sprintf("annotations: key %q: %s", k, msg))
		}
	}
	sort.Strings(problems)
	return problems
}

// annotateChild marks a desired attachment as the decorator's, as
// Metacontroller does: an object's attachments are told from other
// objects it controls by this annotation.
func (c *computation) annotateChild(obj *unstructured.Unstructured) {
	def := c.in.Definition
	if def.ChildAnnotation == "" {
		return
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[def.ChildAnnotation] = def.Name
	obj.SetAnnotations(ann)
}

// attachmentSelector is what a decorated object's attachments are matched
// by instead of a label selector: every candidate, for the candidates of a
// decorator are only the objects carrying its annotation (see
// OwnedCandidates).
var attachmentSelector = labels.Everything()

// OwnedCandidates keeps of the candidate children those the controller may
// claim: for a DecoratorController the objects carrying its annotation, so
// that an object's other dependents, or another decorator's attachments,
// are never claimed, released or deleted. An orphan among them is never
// adopted (definition.AdoptsOrphans): Claim leaves it Unowned.
func OwnedCandidates(def *definition.Definition, candidates []*unstructured.Unstructured) []*unstructured.Unstructured {
	if def.ChildAnnotation == "" {
		return candidates
	}
	out := candidates[:0:0]
	for _, obj := range candidates {
		if def.OwnsChild(obj) {
			out = append(out, obj)
		}
	}
	return out
}
