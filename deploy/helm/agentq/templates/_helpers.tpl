{{- define "agentq.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentq.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "agentq.secretName" -}}
{{- if .Values.secrets.existingSecret -}}{{ .Values.secrets.existingSecret }}{{- else -}}{{ include "agentq.fullname" . }}-keys{{- end -}}
{{- end -}}

{{/* Redis as agentq.yaml's redis section */}}
{{- define "agentq.redis" -}}
{{- if .Values.redis.cluster }}
cluster: {{ toJson .Values.redis.cluster }}
{{- else if .Values.redis.sentinel.masterName }}
sentinel: { master_name: {{ .Values.redis.sentinel.masterName | quote }}, addrs: {{ toJson .Values.redis.sentinel.addrs }} }
{{- else if .Values.redis.url }}
url: {{ .Values.redis.url | quote }}
{{- else if .Values.redis.tls }}
url: {{ printf "rediss://%s" (required "redis.addr is required" .Values.redis.addr) | quote }}
{{- else }}
addr: {{ required "redis.addr, url, sentinel or cluster is required" .Values.redis.addr | quote }}
{{- end }}
{{- end -}}

{{/* Environment every agentq container gets */}}
{{- define "agentq.env" -}}
- name: AGENTQ_CONFIG
  value: /etc/agentq/agentq.yaml
{{- if .Values.redis.passwordSecret.name }}
- name: AGENTQ_REDIS_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ .Values.redis.passwordSecret.name }}, key: {{ .Values.redis.passwordSecret.key }} } }
{{- end }}
{{- end -}}
