// Package sync is the engine shared by the live controller loop and the
// /sync subresource: for one parent of a CompositeController it claims the
// observed children, calls the customize and sync (or finalize) hooks,
// validates the desired children the hook returned and computes the plan
// that would make the cluster match them.
//
// It is pure computation: nothing here writes to any API. Executing a Plan is
// pkg/apply's job; a dry-run shows the very Plan a live sync would execute.
//
// Safety comes before completeness: when a hook fails or answers anything
// invalid, Compute returns an error and no Plan at all, because a partial
// answer read as "these are all the children" would delete the rest.
package sync
