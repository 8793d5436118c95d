package plugin

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
)

// AggregationLabel is the label of the ClusterRoles that
// artifacts/deploy/rbac.yaml aggregates into composite-apiserver's rights
// on parents and children.
const AggregationLabel = "metacontroller.k8s.io/aggregate-to-composite-apiserver"

func newRBACCommand(streams genericiooptions.IOStreams, client ClientFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "rbac CONTROLLER",
		Short: "Print the ClusterRole that lets composite-apiserver run a controller",
		Long: `Read CONTROLLER and print a ClusterRole named
composite-apiserver-CONTROLLER that gives composite-apiserver exactly the
rights that controller's loop checks it has, and no more: get, list, watch
and patch on its parent resource, update on the parent's status, list,
watch, create, patch and delete on each child resource, create on Events,
and, with a rolling update strategy, list, create, update and delete on
ControllerRevisions.

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
			ctrl, err := parseControllerArg(args[0])
			if err != nil {
				return err
			}
			clients, err := client()
			if err != nil {
				return err
			}
			def, err := ctrl.definition(cmd.Context(), clients)
			if err != nil {
				return err
			}
			return writeDefinitionRole(streams.Out, def)
		},
	}
}

// writeClusterRole prints ControllerRole of cc, compiled, as YAML for
// kubectl apply.
func writeClusterRole(w io.Writer, cc *v1alpha1.CompositeController) error {
	def, err := definition.Compile(cc, nil)
	if err != nil {
		return fmt.Errorf("can't read CompositeController %q: %w", cc.Name, err)
	}
	return writeDefinitionRole(w, def)
}

// writeDefinitionRole prints ControllerRole of def as YAML for kubectl
// apply, or, for a controller with an identity, its ServiceAccount's.
func writeDefinitionRole(w io.Writer, def *definition.Definition) error {
	if sa := def.ServiceAccount; sa != nil {
		return writeIdentityRole(w, def, *sa)
	}
	data, err := yaml.Marshal(ControllerRole(def))
	if err != nil {
		return fmt.Errorf("can't encode the ClusterRole: %w", err)
	}
	header := fmt.Sprintf("# What composite-apiserver needs to run %s %q.\n", def.Kind, def.Name)
	if def.Hooks.Customize != nil {
		header += "# Its customize hook's related resources also need get, list and watch.\n"
	}
	_, err = io.WriteString(w, header+string(data))
	return err
}

// writeIdentityRole prints, for a controller that acts as sa, a ClusterRole
// of what its loop does as sa and a ClusterRoleBinding of it to sa: the
// loop's rights without the Events, which the server records itself.
func writeIdentityRole(w io.Writer, def *definition.Definition, sa v1alpha1.ServiceAccountReference) error {
	role := ControllerRole(def)
	role.Name = "composite-controller-" + def.Name
	role.Labels = nil
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if r.APIGroups[0] == definition.Events.Group {
			r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool { return res == definition.Events.Resource })
		}
		if len(r.Resources) > 0 {
			rules = append(rules, r)
		}
	}
	role.Rules = rules
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	roleData, err := yaml.Marshal(role)
	if err != nil {
		return fmt.Errorf("can't encode the ClusterRole: %w", err)
	}
	bindingData, err := yaml.Marshal(binding)
	if err != nil {
		return fmt.Errorf("can't encode the ClusterRoleBinding: %w", err)
	}
	header := fmt.Sprintf("# What %s %q does as its identity, ServiceAccount %s/%s.\n", def.Kind, def.Name, sa.Namespace, sa.Name) +
		"# Bound in all namespaces here: to confine it, bind the ClusterRole with a RoleBinding per namespace instead.\n" +
		fmt.Sprintf("# composite-apiserver also needs impersonate and get on serviceaccounts in namespace %s.\n", sa.Namespace)
	if def.Hooks.Customize != nil {
		header += "# Its customize hook's related resources also need list.\n"
	}
	_, err = io.WriteString(w, header+string(roleData)+"---\n"+string(bindingData))
	return err
}

// ControllerRole is the aggregated ClusterRole of exactly the rights the
// loop checks for def (rights.Needed): the parent's rules first, as the
// definition lists them, then one rule per API group and set of verbs,
// sorted, so that the output of an unchanged controller is the same every
// time and re-applying it changes nothing.
func ControllerRole(def *definition.Definition) *rbacv1.ClusterRole {
	type resource struct{ group, name string }
	var order []resource
	verbs := map[resource][]string{}
	for _, r := range rights.Needed(def) {
		res := resource{r.Group, r.Resource}
		if r.Subresource != "" {
			res.name += "/" + r.Subresource
		}
		if _, ok := verbs[res]; !ok {
			order = append(order, res)
		}
		verbs[res] = append(verbs[res], r.Verb)
	}
	var rules, rest []rbacv1.PolicyRule
	for _, res := range order {
		rule := rbacv1.PolicyRule{APIGroups: []string{res.group}, Resources: []string{res.name}, Verbs: verbs[res]}
		if def.IsParent(res.group, strings.TrimSuffix(res.name, "/status")) {
			rules = append(rules, rule)
			continue
		}
		// Resources of one group with the same verbs share a rule.
		merged := false
		for i := range rest {
			if rest[i].APIGroups[0] == res.group && slices.Equal(rest[i].Verbs, rule.Verbs) {
				rest[i].Resources = append(rest[i].Resources, res.name)
				merged = true
				break
			}
		}
		if !merged {
			rest = append(rest, rule)
		}
	}
	for i := range rest {
		sort.Strings(rest[i].Resources)
	}
	sort.SliceStable(rest, func(i, j int) bool {
		if rest[i].APIGroups[0] != rest[j].APIGroups[0] {
			return rest[i].APIGroups[0] < rest[j].APIGroups[0]
		}
		return rest[i].Resources[0] < rest[j].Resources[0]
	})
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   roleName(def),
			Labels: map[string]string{AggregationLabel: "true"},
		},
		Rules: append(rules, rest...),
	}
}

// roleName is composite-apiserver-NAME for a CompositeController, and
// composite-apiserver-decorator-NAME for a DecoratorController, which may
// have a CompositeController's name.
func roleName(def *definition.Definition) string {
	if def.Kind == definition.KindDecorator {
		return "composite-apiserver-decorator-" + def.Name
	}
	return "composite-apiserver-" + def.Name
}
