package sync

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDiff(t *testing.T) {
	u := func(m map[string]interface{}) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: m}
	}
	base := func(extra map[string]interface{}) map[string]interface{} {
		m := map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "a"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name              string
		observed, desired map[string]interface{}
		want              []string
	}{
		{
			name:     "equal",
			observed: base(map[string]interface{}{"data": map[string]interface{}{"color": "blue"}}),
			desired:  base(map[string]interface{}{"data": map[string]interface{}{"color": "blue"}}),
		},
		{
			name:     "changed leaf",
			observed: base(map[string]interface{}{"data": map[string]interface{}{"color": "blue"}}),
			desired:  base(map[string]interface{}{"data": map[string]interface{}{"color": "green"}}),
			want:     []string{`data.color: "blue" -> "green"`},
		},
		{
			name:     "missing field in observed",
			observed: base(nil),
			desired:  base(map[string]interface{}{"spec": map[string]interface{}{"replicas": int64(3)}}),
			want:     []string{"spec.replicas: <none> -> 3"},
		},
		{
			name:     "fields only observed has are no difference",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"replicas": int64(3), "paused": false}}),
			desired:  base(map[string]interface{}{"spec": map[string]interface{}{"replicas": int64(3)}}),
		},
		{
			name: "nested maps name the deepest changed fields",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"a": "1", "b": "2"}}}}}),
			desired: base(map[string]interface{}{"spec": map[string]interface{}{"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"a": "9", "c": "3"}}}}}),
			want: []string{`spec.template.metadata.labels.a: "1" -> "9"`, `spec.template.metadata.labels.c: <none> -> "3"`},
		},
		{
			name:     "a list is compared and reported whole",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"ports": []interface{}{int64(80), int64(443)}}}),
			desired:  base(map[string]interface{}{"spec": map[string]interface{}{"ports": []interface{}{int64(80), int64(8443)}}}),
			want:     []string{"spec.ports: [80,443] -> [80,8443]"},
		},
		{
			name:     "a list of another length differs",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"ports": []interface{}{int64(80)}}}),
			desired:  base(map[string]interface{}{"spec": map[string]interface{}{"ports": []interface{}{int64(80), int64(443)}}}),
			want:     []string{"spec.ports: [80] -> [80,443]"},
		},
		{
			name: "defaults inside list elements are no difference",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"containers": []interface{}{
				map[string]interface{}{"name": "web", "image": "nginx", "terminationMessagePath": "/dev/termination-log"}}}}),
			desired: base(map[string]interface{}{"spec": map[string]interface{}{"containers": []interface{}{
				map[string]interface{}{"name": "web", "image": "nginx"}}}}),
		},
		{
			name: "a changed list element differs",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"containers": []interface{}{
				map[string]interface{}{"name": "web", "image": "nginx"}}}}),
			desired: base(map[string]interface{}{"spec": map[string]interface{}{"containers": []interface{}{
				map[string]interface{}{"name": "web", "image": "httpd"}}}}),
			want: []string{`spec.containers: [{"image":"nginx","name":"web"}] -> [{"image":"httpd","name":"web"}]`},
		},
		{
			name:     "numbers compare by value",
			observed: base(map[string]interface{}{"spec": map[string]interface{}{"a": int64(3), "b": float64(2)}}),
			desired:  base(map[string]interface{}{"spec": map[string]interface{}{"a": 3, "b": int64(2)}}),
		},
		{
			name:     "a changed type is reported whole",
			observed: base(map[string]interface{}{"spec": "x"}),
			desired:  base(map[string]interface{}{"spec": map[string]interface{}{"a": "b"}}),
			want:     []string{`spec: "x" -> {"a":"b"}`},
		},
		{
			name: "metadata counts only labels and annotations, keys quoted when needed",
			observed: base(map[string]interface{}{"metadata": map[string]interface{}{
				"name": "a", "resourceVersion": "1", "labels": map[string]interface{}{"app": "p"}}}),
			desired: base(map[string]interface{}{"metadata": map[string]interface{}{
				"name": "a", "resourceVersion": "2", "finalizers": []interface{}{"x"},
				"labels":      map[string]interface{}{"app": "p", "app.kubernetes.io/name": "web"},
				"annotations": map[string]interface{}{"note": "hi"},
			}}),
			want: []string{`metadata.annotations.note: <none> -> "hi"`, `metadata.labels["app.kubernetes.io/name"]: <none> -> "web"`},
		},
		{
			name:     "status, apiVersion and kind are ignored",
			observed: base(map[string]interface{}{"status": map[string]interface{}{"ready": true}}),
			desired: map[string]interface{}{"apiVersion": "v2", "kind": "Other", "metadata": map[string]interface{}{"name": "a"},
				"status": map[string]interface{}{"ready": false}},
		},
		{
			name:     "null asked for where nothing is set is no difference",
			observed: base(nil),
			desired:  base(map[string]interface{}{"data": map[string]interface{}{"x": nil}}),
		},
		{
			name:     "null asked for where a value is set differs",
			observed: base(map[string]interface{}{"data": map[string]interface{}{"x": "1"}}),
			desired:  base(map[string]interface{}{"data": map[string]interface{}{"x": nil}}),
			want:     []string{`data.x: "1" -> null`},
		},
		{
			name:     "no observed object: every desired field",
			observed: nil,
			desired:  base(map[string]interface{}{"data": map[string]interface{}{"b": "2", "a": "1"}}),
			want:     []string{`data.a: <none> -> "1"`, `data.b: <none> -> "2"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obs *unstructured.Unstructured
			if tc.observed != nil {
				obs = u(tc.observed)
			}
			// Maps iterate in random order: the result must not.
			for i := 0; i < 10; i++ {
				if got := Diff(obs, u(tc.desired)); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("Diff = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestDiffIsSortedAcrossManyFields(t *testing.T) {
	obs := &unstructured.Unstructured{Object: map[string]interface{}{"data": map[string]interface{}{}}}
	des := &unstructured.Unstructured{Object: map[string]interface{}{"data": map[string]interface{}{}}}
	want := []string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		des.Object["data"].(map[string]interface{})[k] = k
		want = append(want, "data."+k+`: <none> -> "`+k+`"`)
	}
	for i := 0; i < 20; i++ {
		if got := Diff(obs, des); !reflect.DeepEqual(got, want) {
			t.Fatalf("Diff = %q, want %q", got, want)
		}
	}
}
