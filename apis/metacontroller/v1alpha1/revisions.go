package v1alpha1

// AtRevision is the controller as it was at an earlier revision of its
// status.history: that revision's spec, author and number, the rest as
// now; false when the history has no such revision. The loop runs a
// rollout's current revision from it, a live /sync the revision of its
// parent, and kubectl composite rollout undo writes its spec back.
func (c *CompositeController) AtRevision(revision int64) (*CompositeController, bool) {
	for _, h := range c.Status.History {
		if h.Revision == revision {
			at := c.DeepCopy()
			at.Spec, at.Status.Author, at.Status.Revision = *h.Spec.DeepCopy(), h.Author.DeepCopy(), h.Revision
			return at, true
		}
	}
	return nil, false
}

// AtRevision is the controller as it was at an earlier revision, as a
// CompositeController's.
func (c *DecoratorController) AtRevision(revision int64) (*DecoratorController, bool) {
	for _, h := range c.Status.History {
		if h.Revision == revision {
			at := c.DeepCopy()
			at.Spec, at.Status.Author, at.Status.Revision = *h.Spec.DeepCopy(), h.Author.DeepCopy(), h.Revision
			return at, true
		}
	}
	return nil, false
}
