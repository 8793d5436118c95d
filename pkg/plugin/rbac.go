package plugin

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// AggregationLabel is the label of the ClusterRoles that
// artifacts/deploy/rbac.yaml aggregates into composite-apiserver's rights
// on parents and children.
const AggregationLabel = "metacontroller.k8s.io/aggregate-to-composite-apiserver"

// Verbs the controller needs: it watches and updates parents (finalizers)
// and their status, and manages children entirely.
var (
	parentVerbs       = []string{"get", "list", "watch", "update", "patch"}
	parentStatusVerbs = []string{"get", "update", "patch"}
	childVerbs        = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

func newRBACCommand(streams genericiooptions.IOStreams, client ClientFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "rbac CONTROLLER",
		Short: "Print the ClusterRole that lets composite-apiserver run a controller",
		Long: `Read CONTROLLER and print a ClusterRole named
composite-apiserver-CONTROLLER that gives composite-apiserver exactly the
rights that controller needs: get, list, watch, update and patch on its
parent resource, get, update and patch on the parent's status, and get, list,
watch, create, update, patch and delete on each child resource.

The ClusterRole carries the label
metacontroller.k8s.io/aggregate-to-composite-apiserver: "true", so the
aggregated ClusterRole of artifacts/deploy/rbac.yaml takes it in: applying it
is all an admin does. Resources are taken from the controller as written;
nothing else is read from the cluster. Related resources of a customize hook
are not known before it runs: grant get, list and watch on them yourself.`,
		Example: `  # Grant composite-apiserver what the controller hello needs
  kubectl composite rbac hello | kubectl apply -f -

  # Review it first
  kubectl composite rbac hello > hello-rbac.yaml`,
		Args: exactArgs("CONTROLLER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ccs, err := client()
			if err != nil {
				return err
			}
			cc, err := ccs.Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("can't read CompositeController %q: %w", args[0], err)
			}
			return writeClusterRole(streams.Out, cc)
		},
	}
}

// writeClusterRole prints ControllerRole(cc) as YAML for kubectl apply.
func writeClusterRole(w io.Writer, cc *v1alpha1.CompositeController) error {
	role, err := ControllerRole(cc)
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(role)
	if err != nil {
		return fmt.Errorf("can't encode the ClusterRole: %w", err)
	}
	header := fmt.Sprintf("# What composite-apiserver needs to run CompositeController %q.\n", cc.Name)
	if cc.Spec.Hooks != nil && cc.Spec.Hooks.Customize != nil {
		header += "# Its customize hook's related resources also need get, list and watch.\n"
	}
	_, err = io.WriteString(w, header+string(data))
	return err
}

// ControllerRole is the aggregated ClusterRole of cc's rights: one rule
// for the parent resource, one for its status, and one per API group of
// child resources.
func ControllerRole(cc *v1alpha1.CompositeController) (*rbacv1.ClusterRole, error) {
	parent := cc.Spec.ParentResource.ResourceRule
	parentGroup, err := apiGroup(parent)
	if err != nil {
		return nil, fmt.Errorf("can't read the parent resource of CompositeController %q: %w", cc.Name, err)
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{parentGroup}, Resources: []string{parent.Resource}, Verbs: parentVerbs},
		{APIGroups: []string{parentGroup}, Resources: []string{parent.Resource + "/status"}, Verbs: parentStatusVerbs},
	}
	children := map[string]map[string]bool{}
	for i, child := range cc.Spec.ChildResources {
		group, err := apiGroup(child.ResourceRule)
		if err != nil {
			return nil, fmt.Errorf("can't read child resource %d of CompositeController %q: %w", i, cc.Name, err)
		}
		if children[group] == nil {
			children[group] = map[string]bool{}
		}
		children[group][child.Resource] = true
	}
	groups := make([]string, 0, len(children))
	for group := range children {
		groups = append(groups, group)
	}
	// Sorted, so that the output of an unchanged controller is the same
	// every time and re-applying it changes nothing.
	sort.Strings(groups)
	for _, group := range groups {
		resources := make([]string, 0, len(children[group]))
		for resource := range children[group] {
			resources = append(resources, resource)
		}
		sort.Strings(resources)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: childVerbs})
	}
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   "composite-apiserver-" + cc.Name,
			Labels: map[string]string{AggregationLabel: "true"},
		},
		Rules: rules,
	}, nil
}

// apiGroup is the API group of a rule's apiVersion ("" for the core group).
func apiGroup(rule v1alpha1.ResourceRule) (string, error) {
	if rule.Resource == "" {
		return "", fmt.Errorf("no resource")
	}
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil {
		return "", err
	}
	return gv.Group, nil
}
