package hooks

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestClusterSecretSource(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "cm"}, Data: map[string]string{"k": "v"}},
	)
	src := NewClusterSecretSource(client)
	ctx := context.Background()

	if data, err := src.SecretData(ctx, "sys", "s"); err != nil || string(data["k"]) != "v" {
		t.Errorf("SecretData = %v, %v", data, err)
	}
	if data, err := src.ConfigMapData(ctx, "sys", "cm"); err != nil || data["k"] != "v" {
		t.Errorf("ConfigMapData = %v, %v", data, err)
	}
	_, err := src.SecretData(ctx, "sys", "missing")
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "can't get Secret sys/missing") {
		t.Errorf("want a wrapped NotFound naming the Secret, got %v", err)
	}
}

func TestNoClusterSecretSourceSaysWhy(t *testing.T) {
	_, err := NoClusterSecretSource{}.SecretData(context.Background(), "sys", "s")
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), "needs a target cluster") {
		t.Errorf("SecretData error %v", err)
	}
	_, err = NoClusterSecretSource{}.ConfigMapData(context.Background(), "sys", "cm")
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), "ConfigMap sys/cm") {
		t.Errorf("ConfigMapData error %v", err)
	}
}
