package framework

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// gitOpsValues is ci/gitops-values.yaml, the GitOps values: the
// operator's Secrets for every certificate and the chart told to generate
// none.
func gitOpsValues(t *testing.T) string {
	t.Helper()
	modes, err := ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	file, ok := modes["gitops"]
	if !ok {
		t.Fatalf("the chart has no ci/gitops-values.yaml (modes %v)", modes)
	}
	return file
}

// With the operator's Secrets and bootstrapCerts.enabled=false, as Argo CD
// or Flux render it (helm template, no cluster), the chart renders no key
// material: two renders are byte for byte the same, hold no Secret, and
// every pod mounts the Secrets named, the server reading the APIService's
// caBundle from the serving Secret's ca.crt.
// Without them, two renders differ (new CAs each time): the comparison can
// tell.
func TestChartWithExistingSecretsRendersTheSameEveryTime(t *testing.T) {
	values := gitOpsValues(t)
	first, err := RenderChart(chartNamespace, values)
	if err != nil {
		t.Fatal(err)
	}
	second, err := RenderChart(chartNamespace, values)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("two renders with existing Secrets differ:\n%s", firstDifference(first, second))
	}
	bootstrap1, err1 := RenderChart(chartNamespace, "")
	bootstrap2, err2 := RenderChart(chartNamespace, "")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if bootstrap1 == bootstrap2 {
		t.Errorf("two renders that generate certificates are the same: the comparison above cannot fail")
	}

	objs, err := SplitManifests(first)
	if err != nil {
		t.Fatal(err)
	}
	mounted := map[string][]string{}
	for _, o := range objs {
		var pod corev1.PodSpec
		switch o.Kind {
		case "Secret":
			t.Errorf("with existing Secrets the chart renders Secret %s", o.Name)
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict([]byte(o.YAML), &d); err != nil {
				t.Fatal(err)
			}
			pod = d.Spec.Template.Spec
			servingCAFromSecret(t, pod, "my-serving-cert")
		case "StatefulSet":
			var s appsv1.StatefulSet
			if err := yaml.UnmarshalStrict([]byte(o.YAML), &s); err != nil {
				t.Fatal(err)
			}
			pod = s.Spec.Template.Spec
		case "CronJob":
			var c batchv1.CronJob
			if err := yaml.UnmarshalStrict([]byte(o.YAML), &c); err != nil {
				t.Fatal(err)
			}
			pod = c.Spec.JobTemplate.Spec.Template.Spec
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				mounted[o.Kind+" "+o.Name] = append(mounted[o.Kind+" "+o.Name], v.Secret.SecretName)
			}
		}
	}
	for what, want := range map[string][]string{
		"Deployment composite-apiserver":          {"my-serving-cert", "my-etcd-client"},
		"StatefulSet composite-apiserver-etcd":    {"my-etcd-server"},
		"CronJob composite-apiserver-etcd-backup": {"my-etcd-client"},
		"CronJob composite-apiserver-etcd-defrag": {"my-etcd-client"},
	} {
		if strings.Join(mounted[what], ",") != strings.Join(want, ",") {
			t.Errorf("%s mounts Secrets %v, want %v", what, mounted[what], want)
		}
	}
}

// Certificate values the chart cannot serve are refused at render time.
func TestChartRefusesCertificateValuesItCannotServe(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no bootstrap and no serving Secret", []string{"bootstrapCerts.enabled=false"}, "needs servingCert.existingSecret"},
		{"no bootstrap and no etcd Secrets", []string{"bootstrapCerts.enabled=false", "servingCert.existingSecret=s"},
			"needs etcd.bundled.existingSecret.server and .client"},
		{"one etcd Secret of two", []string{"etcd.bundled.existingSecret.server=s"}, "give both server and client"},
		{"backup of an external etcd", []string{"etcd.mode=external", "etcd.external.servers={https://e:2379}", "etcd.backup.enabled=true"},
			"etcd.backup and etcd.defrag are for the bundled etcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderChart(chartNamespace, "", tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendering with %v: %v, want an error saying %q", tc.set, err, tc.want)
			}
		})
	}
}

// The backup and defrag CronJobs' pods run under PodSecurity "restricted":
// non-root, RuntimeDefault seccomp, no privilege escalation, no
// capabilities.
func TestChartEtcdCronJobsAreRestricted(t *testing.T) {
	rendered, err := RenderChart(chartNamespace, "", "etcd.backup.enabled=true", "etcd.defrag.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for _, o := range objs {
		if o.Kind != "CronJob" {
			continue
		}
		jobs++
		var c batchv1.CronJob
		if err := yaml.UnmarshalStrict([]byte(o.YAML), &c); err != nil {
			t.Fatal(err)
		}
		pod := c.Spec.JobTemplate.Spec.Template.Spec
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil ||
			sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("CronJob %s: the pod is not non-root with RuntimeDefault seccomp: %+v", o.Name, sc)
		}
		for _, ctr := range append(pod.InitContainers, pod.Containers...) {
			sc := ctr.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
				len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("CronJob %s container %s: escalation allowed or capabilities kept: %+v", o.Name, ctr.Name, sc)
			}
		}
	}
	if jobs != 2 {
		t.Errorf("with etcd.backup and etcd.defrag enabled the chart renders %d CronJobs, want 2", jobs)
	}
}

// servingCAFromSecret fails t unless the server's --apiservice-ca-file is
// ca.crt in a volume of the Secret secret: the APIService's caBundle is
// then the CA that Secret holds.
func servingCAFromSecret(t *testing.T, pod corev1.PodSpec, secret string) {
	t.Helper()
	for _, ctr := range pod.Containers {
		for _, arg := range ctr.Args {
			file, ok := strings.CutPrefix(arg, "--apiservice-ca-file=")
			if !ok {
				continue
			}
			for _, m := range ctr.VolumeMounts {
				if file != m.MountPath+"/ca.crt" {
					continue
				}
				for _, v := range pod.Volumes {
					if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secret {
						return
					}
				}
			}
			t.Errorf("container %s: --apiservice-ca-file=%s is not ca.crt of Secret %s", ctr.Name, file, secret)
			return
		}
	}
	t.Errorf("no container has --apiservice-ca-file")
}

// firstDifference shows the first line where a and b differ.
func firstDifference(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return "line " + la[i] + "\nvs   " + lb[i]
		}
	}
	return "one render is longer"
}
