package loop

import (
	"context"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A DecoratorController of two resources runs one queue, as Metacontroller's
// decorator does (/metrics has one workqueue of its name, none per
// resource), and a Hello and a ConfigMap of one name in one namespace,
// whose keys would collide in it were the resource not part of the key,
// are both decorated, each with its own attachment.
func TestDecoratorOfTwoResourcesRunsOneQueue(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	const name = "decorate-one-queue"
	ns := suite.Namespace(t, name)
	ctx := context.Background()
	createDecorator(t, name, hook.URL)

	hello := suite.CreateHello(t, ns, "same", name, map[string]interface{}{}, annotate(map[string]string{"attach": "h"}))
	cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "same", Labels: map[string]string{"test": name}, Annotations: map[string]string{"attach": "c"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitDecorated(t, func() (metav1.Object, error) {
		return suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "same", metav1.GetOptions{})
	})
	waitDecorated(t, func() (metav1.Object, error) {
		return suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "same", metav1.GetOptions{})
	})
	waitAttachment(t, ns, "same-h", name, hello)
	waitAttachment(t, ns, "same-c", name, cm)

	metrics := suite.CompositeGet(t, "/metrics")
	queue := `workqueue_adds_total{name="decoratorcontroller-` + name + `"}`
	if !strings.Contains(metrics, queue) {
		t.Errorf("/metrics lacks %s", queue)
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "workqueue_adds_total{") && strings.Contains(line, `name="decoratorcontroller-`+name+`-`) {
			t.Errorf("/metrics has a queue per resource: %s", line)
		}
	}
}
