package hookapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// MaxRequestBytes is the largest request body the handlers accept. A sync
// request carries every child of a parent, so it is generous, but bounded so
// that a broken or hostile caller cannot exhaust the hook's memory.
const MaxRequestBytes = 32 << 20

// SyncHandler serves hook over HTTP: it decodes a POSTed SyncHookRequest and
// answers the hook's SyncHookResponse as JSON. Use it for the sync and the
// finalize hook.
func SyncHandler(hook SyncHook) http.Handler {
	return handler("sync", hook.Sync)
}

// CustomizeHandler serves hook over HTTP: it decodes a POSTed
// CustomizeHookRequest and answers the hook's CustomizeHookResponse as JSON.
func CustomizeHandler(hook CustomizeHook) http.Handler {
	return handler("customize", hook.Customize)
}

// PatchHandler serves a patch hook over HTTP: it decodes a POSTed
// GenerateRequest and answers the generator's GenerateResponse as JSON.
func PatchHandler(g Generator) http.Handler {
	return handler("patch", g.Generate)
}

func handler[Req, Resp any](name string, call func(context.Context, *Req) (*Resp, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, fmt.Sprintf("method %s not allowed: %s hooks are called with POST", r.Method, name), http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > MaxRequestBytes {
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("request body larger than %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, fmt.Sprintf("can't read request body: %v", err), http.StatusBadRequest)
			return
		}
		// Decoding is not strict so that a hook keeps working when the
		// server sends fields added to the contract after it was built.
		// Integers stay int64 in unstructured content.
		req := new(Req)
		if err := utiljson.Unmarshal(body, req); err != nil {
			http.Error(w, fmt.Sprintf("can't decode %s hook request: %v", name, err), http.StatusBadRequest)
			return
		}
		resp, err := call(r.Context(), req)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s hook failed: %v", name, err), http.StatusInternalServerError)
			return
		}
		if resp == nil {
			// An empty answer would tell the server to delete every child;
			// a hook with nothing to say must say so explicitly.
			http.Error(w, fmt.Sprintf("%s hook returned no response", name), http.StatusInternalServerError)
			return
		}
		out, err := json.Marshal(resp)
		if err != nil {
			http.Error(w, fmt.Sprintf("can't encode %s hook response: %v", name, err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
	})
}
