// Package plugin is `kubectl composite`, a kubectl plugin for
// CompositeControllers served by composite-apiserver: preview what a sync
// would do (as `kubectl diff` does for manifests), sync a parent now, and
// print the RBAC a controller needs.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Exit codes, as `kubectl diff` has them, so that scripts and CI can tell
// "the plan changes something" from "the preview failed".
const (
	ExitOK      = 0
	ExitChanges = 1
	ExitError   = 2
)

// errChanges ends a preview whose plan changes something: not a failure,
// so nothing is printed, but exit code 1.
var errChanges = errors.New("the plan changes children")

// Run runs the plugin with args (without the program name) and returns the
// process's exit code. Errors are printed as one line on streams.ErrOut.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := NewCommand(streams, flags, clientFromFlags(flags, streams.ErrOut))
	cmd.SetArgs(args)
	return exitCode(cmd.ExecuteContext(ctx), streams.ErrOut)
}

// NewCommand returns the `kubectl composite` command with its subcommands;
// flags are the kubeconfig flags, and client makes the client they select
// (a fake in tests).
func NewCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, client ClientFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-composite",
		Short: "Preview, run and grant the syncs of composite-apiserver's controllers",
		Long: `kubectl composite works with the CompositeControllers and DecoratorControllers that
composite-apiserver serves (metacontroller.k8s.io). CONTROLLER is NAME for a
CompositeController, and dec/NAME (or decoratorcontroller/NAME) for a DecoratorController:

  preview   what a sync of one parent would do, as a table and a diff, changing nothing
  sync      sync one live parent now
  rbac      the ClusterRole that gives composite-apiserver the rights a controller needs
  rollout   status, history, pause, resume and undo of a controller's rollout (spec.rollout)

The kubeconfig flags (--kubeconfig, --context, -n, ...) work as in kubectl.`,
		// Errors are printed once, as one line, by Run; a usage dump would
		// hide them.
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl composite"},
	}
	cmd.CompletionOptions.HiddenDefaultCmd = true
	cmd.SetUsageTemplate(usageTemplate)
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	flags.AddFlags(cmd.PersistentFlags())
	// A flag error names the flag; one line says it all.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	cmd.AddCommand(
		newPreviewCommand(streams, flags, client),
		newSyncCommand(streams, flags, client),
		newRBACCommand(streams, client),
		newRolloutCommand(streams, client),
	)
	return cmd
}

// exitCode turns a command's error into the exit code, printing it.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errChanges):
		return ExitChanges
	case errors.As(err, new(*rolloutFailed)):
		// Printed already, as kubectl rollout status prints it; exit 1
		// as kubectl does.
		return 1
	default:
		fmt.Fprintln(stderr, "error: "+oneLine(err.Error()))
		return ExitError
	}
}

// oneLine folds a multi-line message (an invalid object's causes, a hook's
// answer) into one line: scripts read the first line of stderr.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// usageTemplate is cobra's, without the kubeconfig flags under every
// command: they would bury each command's own flags, as kubectl keeps its
// global flags for `kubectl options`.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

The kubeconfig flags (--kubeconfig, --context, -n, ...) are listed by "{{.Root.CommandPath}} --help".{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`
