package framework

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// This test runs in every `go test ./...`, without a stack.

// More than one replica of the shipped Deployment must not each run the
// loop: its arguments, read by the server's own command line, turn leader
// election on, and rbac.yaml lets its service account hold the Lease
// where the server looks for it.
func TestShippedDeploymentElectsALeader(t *testing.T) {
	o, d, err := ShippedOptions()
	if err != nil {
		t.Fatal(err)
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas > 1 && !o.LeaderElect {
		t.Fatalf("the shipped Deployment runs %d replicas without --leader-elect: each runs the controller loop", replicas)
	}
	if !o.LeaderElect {
		return
	}
	le := o.LeaderElection
	if le.Namespace != d.Namespace {
		t.Errorf("the Lease is in namespace %q, the Deployment in %q", le.Namespace, d.Namespace)
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: d.Namespace}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rbac, err := os.ReadFile(filepath.Join(root, "artifacts", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !mayHoldLeases(t, string(rbac), sa, le.Namespace) {
		t.Errorf("artifacts/deploy/rbac.yaml does not let %s/%s get, create and update Leases in namespace %s", sa.Namespace, sa.Name, le.Namespace)
	}
}

// mayHoldLeases tells whether a RoleBinding among the manifests in data
// (YAML documents) gives sa the verbs of client-go's Lease lock in
// namespace.
func mayHoldLeases(t *testing.T, data string, sa rbacv1.Subject, namespace string) bool {
	roles := map[string][]rbacv1.PolicyRule{}
	var bindings []rbacv1.RoleBinding
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(data, -1) {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		switch head.Kind {
		case "Role", "ClusterRole":
			var r rbacv1.Role
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatalf("rbac.yaml: %v", err)
			}
			roles[head.Kind+"/"+r.Namespace+"/"+r.Name] = r.Rules
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.Unmarshal([]byte(doc), &b); err != nil {
				t.Fatalf("rbac.yaml: %v", err)
			}
			bindings = append(bindings, b)
		}
	}
	for _, b := range bindings {
		if b.Namespace != namespace || !slices.Contains(b.Subjects, sa) {
			continue
		}
		roleNamespace := namespace
		if b.RoleRef.Kind == "ClusterRole" {
			roleNamespace = ""
		}
		for _, rule := range roles[b.RoleRef.Kind+"/"+roleNamespace+"/"+b.RoleRef.Name] {
			if slices.Contains(rule.APIGroups, "coordination.k8s.io") && slices.Contains(rule.Resources, "leases") &&
				slices.Contains(rule.Verbs, "get") && slices.Contains(rule.Verbs, "create") && slices.Contains(rule.Verbs, "update") {
				return true
			}
		}
	}
	return false
}
