package hooks

import (
	"math"
	"reflect"
	"testing"

	kjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// sameAnswer tells whether two decoded answers are equal down to the Go
// types and the sign of a zero resyncAfterSeconds.
func sameAnswer(a, b *hookapi.SyncHookResponse) bool {
	return reflect.DeepEqual(a, b) && math.Signbit(a.ResyncAfterSeconds) == math.Signbit(b.ResyncAfterSeconds)
}

func decodedByKJSON(data []byte) (*hookapi.SyncHookResponse, error) {
	resp := &hookapi.SyncHookResponse{}
	return resp, kjson.UnmarshalCaseSensitivePreserveInts(data, resp)
}

const usualAnswer = `{"status":{"observed":10,"ready":true,"conditions":[{"type":"Ready","status":"True"}]},` +
	`"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p1-0","labels":{"app":"b2"}},"data":{"index":"0","ratio":"0.5"}},` +
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":3,"big":9223372036854775808,"f":1.5}}],` +
	`"resyncAfterSeconds":2.5,"finalized":false,"extra":{"ignored":true}}`

func TestSyncAnswerDecodesInOnePassAsSigsK8sJSON(t *testing.T) {
	for _, in := range []string{
		usualAnswer,
		`{}`,
		` {"status":null,"children":null,"resyncAfterSeconds":null,"finalized":null} `,
		`{"children":[]}`,
		`{"children":[null,{"kind":"K"}]}`,
		`{"resyncAfterSeconds":-0}`,
		`{"resyncAfterSeconds":0}`,
		`{"resyncAfterSeconds":9007199254740993}`,
		`{"resyncAfterSeconds":1e2,"finalized":true}`,
		// Keys are case-sensitive: these are not the answer's members.
		`{"Status":{"a":1},"CHILDREN":5,"Finalized":"yes"}`,
		`{"status":{"a":1,"a":2}}`,
	} {
		got, usual := decodeSyncAnswer([]byte(in))
		if !usual {
			t.Errorf("decodeSyncAnswer(%s) left a usual answer to sigs.k8s.io/json", in)
			continue
		}
		want, err := decodedByKJSON([]byte(in))
		if err != nil {
			t.Fatalf("sigs.k8s.io/json refuses %s: %v", in, err)
		}
		if !sameAnswer(got, want) {
			t.Errorf("decodeSyncAnswer(%s) = %#v, want sigs.k8s.io/json's %#v", in, got, want)
		}
	}
}

// TestUnusualSyncAnswersAreLeftToSigsK8sJSON: what decodes otherwise (a
// member written twice: encoding/json merges the two statuses), or not at
// all, goes to sigs.k8s.io/json, whose answer or error stands.
func TestUnusualSyncAnswersAreLeftToSigsK8sJSON(t *testing.T) {
	for _, in := range []string{
		`{"status":{"a":1},"status":{"b":2}}`,
		`{"children":[],"children":[{"kind":"K"}]}`,
		`{"status":[]}`, `{"status":"s"}`, `{"status":1}`,
		`{"children":{}}`, `{"children":[1]}`, `{"children":[{}]}`, `{"children":[{"kind":5}]}`,
		`{"children":[{"kind":"K","apiVersion":"a/b/c"}]}`,
		`{"resyncAfterSeconds":"1"}`, `{"resyncAfterSeconds":1e400}`, `{"finalized":1}`,
		`[]`, `null`, `{"status":{}`, "{\"a\":\"\xff\"}",
	} {
		if got, usual := decodeSyncAnswer([]byte(in)); usual {
			t.Errorf("decodeSyncAnswer(%s) = %#v, want it left to sigs.k8s.io/json", in, got)
		}
	}
}

// TestWebhookDecodesAnUnusualAnswerAsBefore: through the client, an
// answer with its status written twice still merges the two, as
// sigs.k8s.io/json did.
func TestWebhookDecodesAnUnusualAnswerAsBefore(t *testing.T) {
	w := &Webhook{}
	resp := &hookapi.SyncHookResponse{}
	if err := w.decode([]byte(`{"status":{"a":1},"children":[],"status":{"b":2}}`), resp); err != nil {
		t.Fatal(err)
	}
	if want := map[string]interface{}{"a": int64(1), "b": int64(2)}; !reflect.DeepEqual(resp.Status, want) {
		t.Errorf("status = %#v, want the merge sigs.k8s.io/json makes, %#v", resp.Status, want)
	}
	resp = &hookapi.SyncHookResponse{}
	if err := w.decode([]byte(usualAnswer), resp); err != nil {
		t.Fatal(err)
	}
	if want, _ := decodedByKJSON([]byte(usualAnswer)); !sameAnswer(resp, want) {
		t.Errorf("the usual answer decoded to %#v, want %#v", resp, want)
	}
}

// FuzzSyncAnswer: an answer decodeSyncAnswer decodes, sigs.k8s.io/json
// decodes too, into the same response.
func FuzzSyncAnswer(f *testing.F) {
	f.Add([]byte(usualAnswer))
	f.Add([]byte(`{"status":{"a":1},"status":{"b":2},"children":[null,{"kind":"K","apiVersion":"v1"}],"resyncAfterSeconds":-0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, usual := decodeSyncAnswer(data)
		if !usual {
			return
		}
		want, err := decodedByKJSON(data)
		if err != nil {
			t.Fatalf("decodeSyncAnswer(%q) = %#v, but sigs.k8s.io/json refuses it: %v", data, got, err)
		}
		if !sameAnswer(got, want) {
			t.Fatalf("decodeSyncAnswer(%q) = %#v, want sigs.k8s.io/json's %#v", data, got, want)
		}
	})
}
