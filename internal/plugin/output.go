package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputYAML  = "yaml"
	outputJSON  = "json"
)

func checkOutput(format string) error {
	switch format {
	case outputTable, outputYAML, outputJSON:
		return nil
	}
	return fmt.Errorf("can't print -o %q: want table, yaml or json", format)
}

// writeAnswer prints the whole SyncRequest the server answered, as
// kubectl -o yaml|json prints objects.
func writeAnswer(w io.Writer, format string, answer *v1alpha1.SyncRequest) error {
	out := answer.DeepCopy()
	// The typed client drops the type; the printed object names it.
	out.APIVersion, out.Kind = v1alpha1.SchemeGroupVersion.String(), "SyncRequest"
	return writeObject(w, format, out)
}

// writeObject prints obj as kubectl -o yaml|json prints objects.
func writeObject(w io.Writer, format string, obj interface{}) error {
	var data []byte
	var err error
	if format == outputYAML {
		data, err = yaml.Marshal(obj)
	} else {
		if data, err = json.MarshalIndent(obj, "", "    "); err == nil {
			data = append(data, '\n')
		}
	}
	if err != nil {
		return fmt.Errorf("can't encode the answer: %w", err)
	}
	_, err = w.Write(data)
	return err
}

// writeWarnings prints the sync's warnings as kubectl prints the server's.
func writeWarnings(w io.Writer, warnings []string) {
	for _, warning := range warnings {
		fmt.Fprintln(w, "Warning: "+warning)
	}
}

// saveHookRequest writes the hook request the sync sent to dir, as an
// indented JSON file named after the parent: a fixture for the hook's tests.
func saveHookRequest(dir string, parent parentID, status v1alpha1.SyncRequestStatus) (string, error) {
	if status.HookRequest == nil || len(status.HookRequest.Raw) == 0 {
		return "", fmt.Errorf("can't save the hook request: the server called no hook for %s", parent)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, status.HookRequest.Raw, "", "  "); err != nil {
		return "", fmt.Errorf("can't save the hook request: it is not JSON: %w", err)
	}
	indented.WriteByte('\n')
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("can't save the hook request: %w", err)
	}
	path := filepath.Join(dir, parent.fileName())
	if err := os.WriteFile(path, indented.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("can't save the hook request: %w", err)
	}
	return path, nil
}
