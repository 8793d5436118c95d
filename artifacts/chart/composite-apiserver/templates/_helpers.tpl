{{/* Names every object: one install per cluster. */}}
{{- define "cas.fullname" -}}
{{- default "composite-apiserver" .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "cas.labels" -}}
app.kubernetes.io/name: composite-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "cas.selectorLabels" -}}
app.kubernetes.io/name: composite-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: apiserver
{{- end -}}

{{- define "cas.etcdSelectorLabels" -}}
app.kubernetes.io/name: composite-apiserver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: etcd
{{- end -}}

{{/* The Service's DNS names: the serving certificate must carry them. */}}
{{- define "cas.serviceDNS" -}}
{{- $svc := include "cas.fullname" . -}}
{{- list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson -}}
{{- end -}}

{{- define "cas.etcdService" -}}{{ include "cas.fullname" . }}-etcd{{- end -}}

{{/* Every name the bundled etcd's members answer to. */}}
{{- define "cas.etcdDNS" -}}
{{- $svc := include "cas.etcdService" . -}}
{{- $ns := .Release.Namespace -}}
{{- list (printf "*.%s.%s.svc" $svc $ns) (printf "*.%s.%s.svc.cluster.local" $svc $ns) (printf "%s.%s.svc" $svc $ns) "localhost" | toJson -}}
{{- end -}}

{{- define "cas.etcdServers" -}}
{{- if eq .Values.etcd.mode "bundled" -}}
{{- $svc := include "cas.etcdService" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.bundled.replicas) -}}
{{- $urls = append $urls (printf "https://%s-%d.%s.%s.svc:2379" $svc $i $svc $.Release.Namespace) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.etcd.external.servers -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the server's etcd client certificate, if any. */}}
{{- define "cas.etcdClientSecret" -}}
{{- if eq .Values.etcd.mode "bundled" -}}{{ .Values.etcd.bundled.existingSecret.client | default (printf "%s-etcd-client" (include "cas.fullname" .)) }}
{{- else -}}{{ .Values.etcd.external.tlsSecretName }}{{- end -}}
{{- end -}}

{{/* The Secret holding the bundled etcd members' certificate. */}}
{{- define "cas.etcdServerSecret" -}}
{{ .Values.etcd.bundled.existingSecret.server | default (printf "%s-etcd-server" (include "cas.fullname" .)) }}
{{- end -}}

{{/* The Secret holding the server's serving certificate. */}}
{{- define "cas.servingSecret" -}}
{{ .Values.servingCert.existingSecret | default (printf "%s-serving-cert" (include "cas.fullname" .)) }}
{{- end -}}

{{- define "cas.issuerRef" -}}
{{- if .Values.certManager.issuerRef.name -}}
{{- toYaml .Values.certManager.issuerRef -}}
{{- else -}}
name: {{ include "cas.fullname" . }}-ca
kind: Issuer
{{- end -}}
{{- end -}}

{{/* What the chart refuses to render. */}}
{{- define "cas.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) (not .Values.sharding.enabled) -}}
{{- fail "leaderElection.enabled=false with more than one replica and no sharding: every replica would run the controller loop for every parent (hooks called twice, applies racing)" -}}
{{- end -}}
{{- if and .Values.sharding.enabled (lt (int .Values.sharding.shards) 1) -}}
{{- fail "sharding.shards must be at least 1" -}}
{{- end -}}
{{- if not (has .Values.etcd.mode (list "bundled" "external")) -}}
{{- fail (printf "etcd.mode must be bundled or external, not %q" .Values.etcd.mode) -}}
{{- end -}}
{{- if and (eq .Values.etcd.mode "external") (empty .Values.etcd.external.servers) -}}
{{- fail "etcd.mode=external needs etcd.external.servers" -}}
{{- end -}}
{{- if and (not .Values.bootstrapCerts.enabled) (not .Values.certManager.enabled) -}}
{{- if not .Values.servingCert.existingSecret -}}
{{- fail "bootstrapCerts.enabled=false: the chart generates no certificate, so it needs servingCert.existingSecret, or certManager.enabled" -}}
{{- end -}}
{{- if and (eq .Values.etcd.mode "bundled") (not (and .Values.etcd.bundled.existingSecret.server .Values.etcd.bundled.existingSecret.client)) -}}
{{- fail "bootstrapCerts.enabled=false: the chart generates no certificate, so the bundled etcd needs etcd.bundled.existingSecret.server and .client, or certManager.enabled" -}}
{{- end -}}
{{- end -}}
{{- if and (or .Values.etcd.backup.enabled .Values.etcd.defrag.enabled) (ne .Values.etcd.mode "bundled") -}}
{{- fail "etcd.backup and etcd.defrag are for the bundled etcd (etcd.mode=bundled); back up and defragment an external etcd where it runs" -}}
{{- end -}}
{{- if and .Values.hardAntiAffinity .Values.affinity.podAntiAffinity -}}
{{- fail "hardAntiAffinity=true and affinity.podAntiAffinity: set one of them" -}}
{{- end -}}
{{- if not (has .Values.rbac.mode (list "perController" "development")) -}}
{{- fail (printf "rbac.mode must be perController or development, not %q" .Values.rbac.mode) -}}
{{- end -}}
{{- end -}}

{{/* The backup and defrag CronJobs' pod: PodSecurity "restricted". */}}
{{- define "cas.etcdJobPodSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "cas.etcdJobContainerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* etcdctl's TLS flags with the server's client certificate, mounted as the Deployment mounts it. */}}
{{- define "cas.etcdctlTLS" -}}
- --cacert=/var/run/etcd-client/ca.crt
- --cert=/var/run/etcd-client/tls.crt
- --key=/var/run/etcd-client/tls.key
{{- end -}}
