package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"sigs.k8s.io/yaml"
)

// maxBodyDepth is how deep a request body may nest objects and arrays. No
// CompositeController needs a tenth of it, nor does a SyncRequest's inline
// parent and children (Kubernetes objects rarely go past 30 levels).
//
// What costs memory and time with the square of the depth (merging a patch,
// tracking managed fields) would otherwise take a body of 30 KiB nested
// 5,000 deep to 200 MiB and 2 s, and the JSON decoder's own limit is
// 10,000 levels.
const maxBodyDepth = 100

// withBodyDepthLimit refuses, with 400, a request body that nests deeper
// than maxDepth, before any handler decodes it; it also answers 413 for a
// body over maxBytes, as the handlers would, since it reads the body to
// look. It runs inside the handler chain: only authenticated and
// authorized requests have their bodies read.
func withBodyDepthLimit(handler http.Handler, maxDepth int, maxBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body == nil || req.Body == http.NoBody || maxBytes <= 0 ||
			(req.Method != http.MethodPost && req.Method != http.MethodPut && req.Method != http.MethodPatch) {
			handler.ServeHTTP(w, req)
			return
		}
		data, err := io.ReadAll(io.LimitReader(req.Body, maxBytes+1))
		if err != nil {
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				err = apierrors.NewBadRequest(fmt.Sprintf("can't read the request body: %v", err))
			}
			responsewriters.ErrorNegotiated(err, Codecs, schema.GroupVersion{}, w, req)
			return
		}
		if int64(len(data)) > maxBytes {
			responsewriters.ErrorNegotiated(apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBytes)), Codecs, schema.GroupVersion{}, w, req)
			return
		}
		if depth := bodyDepth(data, req.Header.Get("Content-Type")); depth > maxDepth {
			responsewriters.ErrorNegotiated(apierrors.NewBadRequest(fmt.Sprintf("the request body nests objects and arrays %d levels deep; at most %d are allowed", depth, maxDepth)),
				Codecs, schema.GroupVersion{}, w, req)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(data))
		handler.ServeHTTP(w, req)
	})
}

// bodyDepth is how deep data nests objects and arrays, read as JSON, or as
// YAML for a YAML content type; 0 when it is neither (the handlers refuse
// it then).
func bodyDepth(data []byte, contentType string) int {
	if media, _, err := mime.ParseMediaType(contentType); err == nil && (media == "application/yaml" || media == "application/apply-patch+yaml") {
		// The handlers turn YAML into JSON in the same way.
		converted, err := yaml.YAMLToJSON(data)
		if err != nil {
			return 0
		}
		data = converted
	}
	return jsonDepth(data)
}

// jsonDepth is the deepest nesting of objects and arrays in data, counted
// outside strings, whether or not data is valid JSON.
func jsonDepth(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
