package definition

import "k8s.io/apimachinery/pkg/runtime/schema"

// Right is one verb on one resource, cluster-wide (the loop watches and
// writes in every namespace), or on one object when Name is set (a Secret
// a hook's credentials come from).
type Right struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
}

func (r Right) String() string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if r.Name != "" {
		res += " " + r.Namespace + "/" + r.Name
	}
	return r.Verb + " " + res
}

// Events is the resource the loop records its Events in.
var Events = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// Namespaces is the resource a related rule's namespaceSelector is matched
// against: the loop, /sync and the rights checks list it.
var Namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// neededRights are the rights the loop uses for d in the target cluster:
// what the informers read, what apply, adoption, deletion, the finalizer
// and the status write do, and the Events it records. In the order a person
// reads them: resources as the spec names them, verbs get, list, watch, ...
func neededRights(d *Definition) []Right {
	var out []Right
	add := func(gvr schema.GroupVersionResource, sub string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, Right{Verb: v, Group: gvr.Group, Resource: gvr.Resource, Subresource: sub})
		}
	}
	for _, p := range d.parentResources() {
		// get: adoption reads the parent again; patch: the finalizer,
		// and a decorator's labels and annotations.
		add(p.GVR, "", "get", "list", "watch", "patch")
		add(p.GVR, "status", "update")
	}
	for _, child := range d.Children {
		// A server-side apply that creates needs create as well as patch.
		add(child.GVR, "", "list", "watch", "create", "patch", "delete")
	}
	add(Events, "", "create")
	if d.Rolling {
		add(ControllerRevisions, "", "list", "create", "update", "delete")
	}
	return out
}
