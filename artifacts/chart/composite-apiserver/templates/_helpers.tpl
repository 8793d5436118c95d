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
{{- if eq .Values.etcd.mode "bundled" -}}{{ include "cas.fullname" . }}-etcd-client
{{- else -}}{{ .Values.etcd.external.tlsSecretName }}{{- end -}}
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
{{- if and .Values.hardAntiAffinity .Values.affinity.podAntiAffinity -}}
{{- fail "hardAntiAffinity=true and affinity.podAntiAffinity: set one of them" -}}
{{- end -}}
{{- if not (has .Values.rbac.mode (list "perController" "development")) -}}
{{- fail (printf "rbac.mode must be perController or development, not %q" .Values.rbac.mode) -}}
{{- end -}}
{{- end -}}
