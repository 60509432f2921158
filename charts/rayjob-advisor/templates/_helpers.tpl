{{- define "rayjob-advisor.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rayjob-advisor.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rayjob-advisor.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The advisor's image: by digest when image.digest is set, else by tag (default: the chart's appVersion). */}}
{{- define "rayjob-advisor.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The pod security every container of the chart runs with. */}}
{{- define "rayjob-advisor.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  seccompProfile: {type: RuntimeDefault}
{{- end -}}
{{- define "rayjob-advisor.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{/* Where the certificate comes from: certificates.mode, or cert-manager with the deprecated certManager.enabled.
     (dig: `helm upgrade --reuse-values` from a release without the value renders with that release's values.) */}}
{{- define "rayjob-advisor.certificatesMode" -}}
{{- $mode := dig "mode" "helm" (.Values.certificates | default dict) -}}
{{- if .Values.certManager.enabled -}}
{{- if eq $mode "operator" -}}
{{- fail "certManager.enabled (deprecated) is certificates.mode cert-manager: set certificates.mode only" -}}
{{- end -}}
{{- $mode = "cert-manager" -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* The webhook's serving certificate, which the controller's progress endpoint serves too: its Secret, mounted
     at /tls in both Deployments, and the progress endpoint's Service, whose names the certificate holds. In operator
     mode another Secret (an Opaque one the controller fills: a kubernetes.io/tls one cannot be rendered empty, and a
     Secret's type cannot change), of which the pods get the certificate, its key and the CA, never the CA's key;
     optional, so that they start before the controller has filled it. */}}
{{- define "rayjob-advisor.tlsSecret" -}}
{{ include "rayjob-advisor.fullname" . }}-webhook-{{ eq (include "rayjob-advisor.certificatesMode" .) "operator" | ternary "certs" "tls" }}
{{- end -}}
{{- define "rayjob-advisor.tlsVolume" -}}
{{- if eq (include "rayjob-advisor.certificatesMode" .) "operator" }}
- name: tls
  secret:
    secretName: {{ include "rayjob-advisor.tlsSecret" . }}
    optional: true
    items: [{key: ca.crt, path: ca.crt}, {key: tls.crt, path: tls.crt}, {key: tls.key, path: tls.key}]
{{- else }}
- {name: tls, secret: {secretName: {{ include "rayjob-advisor.tlsSecret" . }}}}
{{- end }}
{{- end -}}
{{/* The names the serving certificate is for, comma-separated: the webhook's Service's and, with progress, the
     progress endpoint's. */}}
{{- define "rayjob-advisor.serverNames" -}}
{{- $names := list -}}
{{- $services := list (printf "%s-webhook" (include "rayjob-advisor.fullname" .)) -}}
{{- if .Values.progress.enabled }}{{ $services = append $services (include "rayjob-advisor.progressService" .) }}{{ end -}}
{{- range $services }}
{{- $names = concat $names (list . (printf "%s.%s" . $.Release.Namespace) (printf "%s.%s.svc" . $.Release.Namespace)) -}}
{{- end }}
{{- join "," $names -}}
{{- end -}}
{{/* The ConfigMap of the CA the controller keeps in the namespaces of jobs the progress hook wires. */}}
{{- define "rayjob-advisor.caConfigMap" -}}
{{ include "rayjob-advisor.fullname" . }}-ca
{{- end -}}
{{- define "rayjob-advisor.tlsMount" -}}
- {name: tls, mountPath: /tls, readOnly: true}
{{- end -}}
{{- /* The label of the metrics-only Services, which the ServiceMonitor selects. */ -}}
{{- define "rayjob-advisor.metricsLabel" -}}
rayjob-advisor.io/service: metrics
{{- end }}

{{- define "rayjob-advisor.progressService" -}}
{{ include "rayjob-advisor.fullname" . }}-progress
{{- end -}}

{{- define "rayjob-advisor.env" -}}
- {name: RAYJOB_ADVISOR_LOG_FORMAT, value: {{ .Values.logFormat | quote }}}
- {name: RAYJOB_ADVISOR_ADVISE_ALL_JOBS, value: {{ .Values.adviseAllJobs | default false | quote }}}
- {name: RAYJOB_ADVISOR_METRICS_PORT, value: {{ .Values.metrics.port | quote }}}
- {name: RAYJOB_ADVISOR_TLS_MIN_VERSION, value: {{ .Values.tls.minVersion | quote }}}
- {name: RAYJOB_ADVISOR_CPU_HOUR_PRICE, value: {{ .Values.prices.cpuHour | quote }}}
- {name: RAYJOB_ADVISOR_GPU_HOUR_PRICE, value: {{ .Values.prices.gpuHour | quote }}}
- {name: RAYJOB_ADVISOR_ENFORCE_MAX_EXTRAPOLATION, value: {{ .Values.enforceMaxExtrapolation | quote }}}
{{- with .Values.prices.acceleratorGpuHour }}
{{- $pairs := list }}
{{- range $name, $price := . }}{{ $pairs = append $pairs (printf "%s=%v" $name $price) }}{{ end }}
- {name: RAYJOB_ADVISOR_ACCELERATOR_GPU_HOUR_PRICES, value: {{ join "," $pairs | quote }}}
{{- end }}
{{- with .Values.namespaces }}
- {name: RAYJOB_ADVISOR_NAMESPACES, value: {{ join "," . | quote }}}
{{- end }}
{{- with .Values.sharedProfileNamespaces }}
- {name: RAYJOB_ADVISOR_SHARED_PROFILE_NAMESPACES, value: {{ join "," . | quote }}}
{{- end }}
{{- with .Values.hooks }}
- {name: RAYJOB_ADVISOR_HOOKS, value: {{ join "," . | quote }}}
{{- end }}
{{- /* Where progress reports go and the CA that verifies it: what the progress hook gives jobs. */}}
{{- if .Values.progress.enabled }}
- name: RAYJOB_ADVISOR_PROGRESS_URL
  value: {{ printf "https://%s.%s.svc/progress" (include "rayjob-advisor.progressService" .) .Release.Namespace | quote }}
- {name: RAYJOB_ADVISOR_TLS_CA_FILE, value: /tls/ca.crt}
- {name: RAYJOB_ADVISOR_TLS_CA_CONFIGMAP, value: {{ include "rayjob-advisor.caConfigMap" . | quote }}}
{{- end }}
{{- with .Values.defaultWorkload }}
- {name: RAYJOB_ADVISOR_DEFAULT_WORKLOAD, value: {{ . | quote }}}
{{- end }}
{{- /* The HTTPS servers' limits: the webhook's, and the controller's progress endpoint's. */}}
{{- with .Values.webhook.limits }}
- {name: RAYJOB_ADVISOR_WEBHOOK_HEADER_TIMEOUT_SECONDS, value: {{ .headerTimeoutSeconds | quote }}}
- {name: RAYJOB_ADVISOR_WEBHOOK_BODY_TIMEOUT_SECONDS, value: {{ .bodyTimeoutSeconds | quote }}}
- {name: RAYJOB_ADVISOR_WEBHOOK_MAX_CONNECTIONS, value: {{ .maxConnections | quote }}}
{{- end }}
- {name: HOME, value: /tmp}
{{- end -}}
