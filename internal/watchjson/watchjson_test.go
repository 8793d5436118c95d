package watchjson_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/composite-apiserver/composite-apiserver/internal/watchjson"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

const configMap = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"p1-3","namespace":"bench-0","uid":"7c2c3d4e-0000-4000-8000-000000000003","resourceVersion":"12343","creationTimestamp":"2026-12-02T16:00:00Z","labels":{"controller-uid":"6b2c"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Hello","name":"p1","uid":"6b2c","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"metacontroller.k8s.io/bench","operation":"Apply","apiVersion":"v1","time":"2026-12-02T16:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:index":{},"f:parent":{}}}}]},"data":{"index":"3","parent":"p1"}}`

// numbers is an object whose values take every path of a JSON decoder:
// whole numbers in and beyond int64, fractions, exponents, escapes,
// empty and null values.
const numbers = `{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"n","namespace":"bench-0","resourceVersion":"12344"},"spec":{"int":42,"negative":-7,"big":12345678901234567890,"fraction":1.5,"exponent":1e3,"zero":0,"text":"caf\u00e9 \"quoted\"\n\t\\","empty":{},"none":[],"null":null,"yes":true,"no":false,"nested":[[1,2.5,"x"],{"a":[{}]}]}}`

// events is a watch response as kube-apiserver writes it, and envelopes
// in layouts it does not write, which must decode as client-go decodes
// them; the last, an object without a kind, fails both.
var events = []string{
	`{"type":"ADDED","object":` + configMap + `}`,
	`{"type":"MODIFIED","object":` + numbers + `}`,
	`{"type":"DELETED","object":` + configMap + `}`,
	`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12350","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
	`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (12350)","reason":"Expired","code":410}}`,
	`{"object":` + numbers + `,"type":"MODIFIED"}`,
	`{ "type" : "ADDED" , "object" : ` + configMap + ` }`,
	`{"type":"ADDED","object":{"apiVersion":"v1","metadata":{"name":"kindless"}}}`,
}

// fakeAPIServer answers a watch of ConfigMaps with body, a list of them
// and a get of one, in kube-apiserver's JSON.
func fakeAPIServer(t *testing.T, body string) *rest.Config {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			_, _ = w.Write([]byte(body))
		case r.URL.Path == "/api/v1/configmaps":
			_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12350"},"items":[` + configMap + `]}`))
		case r.URL.Path == "/api/v1/namespaces/bench-0/configmaps/p1-3":
			// A get, or an update answered with what is stored.
			_, _ = w.Write([]byte(configMap))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(server.Close)
	return &rest.Config{Host: server.URL}
}

func watchAll(t *testing.T, client dynamic.Interface) []watch.Event {
	w, err := client.Resource(configMaps).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []watch.Event
	for event := range w.ResultChan() {
		got = append(got, event)
	}
	return got
}

func clients(t *testing.T, config *rest.Config) (dynamic.Interface, dynamic.Interface) {
	clientGo, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	onePass, err := watchjson.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return clientGo, onePass
}

// writesClient is the client of an identity's reads and writes.
func writesClient(t testing.TB, config *rest.Config) dynamic.Interface {
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := watchjson.NewForConfigAndClient(config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWatchEventsDecodeAsClientGosDynamicClientDecodesThem(t *testing.T) {
	clientGo, onePass := clients(t, fakeAPIServer(t, strings.Join(events, "\n")+"\n"))
	want, got := watchAll(t, clientGo), watchAll(t, onePass)
	if len(want) != len(events) {
		t.Fatalf("client-go decoded %d events of %d: %v", len(want), len(events), want)
	}
	for i := range want {
		// reflect, not equality.Semantic: the numbers' Go types and the
		// Status event's typed object must be the same too.
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Errorf("event %d (%s):\nclient-go %#v\nwatchjson %#v", i, events[i], want[i], got[i])
		}
	}
	if _, ok := got[4].Object.(*metav1.Status); !ok {
		t.Errorf("the ERROR event's object is a %T, want the *metav1.Status the reflector reads its reason from", got[4].Object)
	}
	if want[len(want)-1].Type != watch.Error {
		t.Errorf("the kindless object decoded: %v", want[len(want)-1])
	}
}

func TestListGetAndWriteDecodeAsClientGosDynamicClientDecodesThem(t *testing.T) {
	config := fakeAPIServer(t, "")
	clientGo, informers := clients(t, config)
	writes := writesClient(t, config)
	ctx := context.Background()
	stored := &unstructured.Unstructured{}
	if err := stored.UnmarshalJSON([]byte(configMap)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call func(dynamic.Interface) (any, error)
	}{
		{"list", func(c dynamic.Interface) (any, error) { return c.Resource(configMaps).List(ctx, metav1.ListOptions{}) }},
		{"get", func(c dynamic.Interface) (any, error) {
			return c.Resource(configMaps).Namespace("bench-0").Get(ctx, "p1-3", metav1.GetOptions{})
		}},
		{"get of what is not there", func(c dynamic.Interface) (any, error) {
			return c.Resource(configMaps).Namespace("bench-0").Get(ctx, "gone", metav1.GetOptions{})
		}},
		{"update", func(c dynamic.Interface) (any, error) {
			return c.Resource(configMaps).Namespace("bench-0").Update(ctx, stored, metav1.UpdateOptions{})
		}},
	} {
		want, wantErr := c.call(clientGo)
		for name, onePass := range map[string]dynamic.Interface{"informers' client": informers, "writes' client": writes} {
			got, gotErr := c.call(onePass)
			if !reflect.DeepEqual(want, got) || !reflect.DeepEqual(wantErr, gotErr) {
				t.Errorf("%s, %s:\nclient-go %#v, %v\nwatchjson %#v, %v", c.name, name, want, wantErr, got, gotErr)
			}
		}
	}
}

// What the writes' client answers with is its caller's to change: two
// answers with the same labels do not share them, as the informers'
// decoding shares them among the objects of its cache.
func TestTheWritesClientsAnswersAreTheCallersOwn(t *testing.T) {
	writes := writesClient(t, fakeAPIServer(t, ""))
	get := func() *unstructured.Unstructured {
		obj, err := writes.Resource(configMaps).Namespace("bench-0").Get(context.Background(), "p1-3", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	first, second := get(), get()
	first.Object["metadata"].(map[string]interface{})["labels"].(map[string]interface{})["changed"] = "by its caller"
	first.Object["metadata"].(map[string]interface{})["ownerReferences"].([]interface{})[0].(map[string]interface{})["name"] = "another"
	if got := second.GetLabels(); !reflect.DeepEqual(got, map[string]string{"controller-uid": "6b2c"}) {
		t.Errorf("changing one answer's labels changed another's: %v", got)
	}
	if got := second.GetOwnerReferences()[0].Name; got != "p1" {
		t.Errorf("changing one answer's owner reference changed another's: %s", got)
	}
}

// An envelope whose object is followed by a field kube-apiserver does not
// write can't be split without reading it: the event fails to decode, it
// is never decoded into another object.
func TestAnEnvelopeWithAFieldAfterItsObjectIsAnErrorNotAnotherObject(t *testing.T) {
	_, onePass := clients(t, fakeAPIServer(t, `{"type":"ADDED","object":`+configMap+`,"extra":{"kind":"Secret"}}`+"\n"))
	got := watchAll(t, onePass)
	if len(got) != 1 || got[0].Type != watch.Error {
		t.Fatalf("got %v, want one error event", got)
	}
	status, ok := got[0].Object.(*metav1.Status)
	if !ok || !strings.Contains(status.Message, "unable to decode") {
		t.Errorf("got %#v, want a Status saying the event could not be decoded", got[0].Object)
	}
}
