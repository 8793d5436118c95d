package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// stdinName is the file name that reads standard input, as in kubectl -f -.
const stdinName = "-"

// fileReader opens the files named on the command line; standard input can
// be read only once, so a second "-" is an error rather than empty input.
type fileReader struct {
	stdin     io.Reader
	stdinRead bool
}

// objects reads every object of a file of YAML documents or JSON objects;
// the items of a List (as `kubectl get -o yaml` writes) are objects too.
func (r *fileReader) objects(path string) ([]*unstructured.Unstructured, error) {
	data, err := r.read(path)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("can't read %s: %w", path, err)
	}
	return objs, nil
}

func (r *fileReader) read(path string) ([]byte, error) {
	if path != stdinName {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("can't read the file: %w", err)
		}
		return data, nil
	}
	if r.stdinRead {
		return nil, errors.New("can't read standard input (-) twice")
	}
	r.stdinRead = true
	data, err := io.ReadAll(r.stdin)
	if err != nil {
		return nil, fmt.Errorf("can't read standard input: %w", err)
	}
	return data, nil
}

// decodeObjects splits data into objects, checking each names its type and
// itself.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			// An empty document, e.g. after a trailing "---".
			continue
		}
		// Decoded as a map, not with Unstructured's decoder, so that a
		// missing kind is reported by checkObject rather than with the
		// whole document in the message. Integers stay int64.
		var content map[string]interface{}
		if err := utiljson.Unmarshal(raw, &content); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		obj := &unstructured.Unstructured{Object: content}
		items := []*unstructured.Unstructured{obj}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			items = items[:0]
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		}
		for _, item := range items {
			if err := checkObject(item); err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			objs = append(objs, item)
		}
	}
}

// checkObject makes sure obj can be sent as a parent or a child: the server
// would refuse it less clearly.
func checkObject(obj *unstructured.Unstructured) error {
	switch {
	case obj.GetKind() == "":
		return fmt.Errorf("an object %q has no kind", obj.GetName())
	case obj.GetAPIVersion() == "":
		return fmt.Errorf("%s %q has no apiVersion", obj.GetKind(), obj.GetName())
	case obj.GetName() == "":
		return fmt.Errorf("a %s has no metadata.name", obj.GetKind())
	}
	if _, err := schema.ParseGroupVersion(obj.GetAPIVersion()); err != nil {
		return fmt.Errorf("%s %q: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
