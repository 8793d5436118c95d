// Package engine is the sync engine shared by the live controller loop and
// the /sync subresource: for one parent of a controller, compiled by
// internal/definition, it claims the observed children, calls the customize and
// sync (or finalize) hooks, runs the patches, validates the desired children
// the hook returned and computes the plan that would make the cluster match
// them, rolling updates included.
//
// It is pure computation: nothing here writes to any API. Executing a Plan is
// internal/apply's job; a dry-run shows the very Plan a live sync would execute.
//
// Safety comes before completeness: when a hook fails or answers anything
// invalid, Compute returns an error and no Plan at all, because a partial
// answer read as "these are all the children" would delete the rest.
//
// It reads a controller only through its definition.Definition, and both
// kinds enter at Compute (compute.go). What every kind shares (compute.go,
// claim.go, validate.go, plan.go, patch.go) is apart from what only a
// rolling update with ControllerRevisions needs (rolling.go,
// revisions.go); DecoratorController's own part (its hook's request and
// answer, its attachments' annotation) is decorator.go, as Metacontroller
// keeps pkg/controller/{common,composite,decorator}.
package engine
