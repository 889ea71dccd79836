{{- define "agentq.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentq.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The API-key Secret's name */}}
{{- define "agentq.secretName" -}}
{{- if .Values.secrets.existingSecret -}}{{ .Values.secrets.existingSecret }}{{- else -}}{{ include "agentq.fullname" . }}-keys{{- end -}}
{{- end -}}

{{/* "true" when there is an API-key Secret: existingSecret, or at least one non-empty secrets.values */}}
{{- define "agentq.hasKeySecret" -}}
{{- $has := .Values.secrets.existingSecret -}}
{{- range $k, $v := .Values.secrets.values }}{{ if $v }}{{ $has = true }}{{ end }}{{ end -}}
{{- if $has }}true{{ end -}}
{{- end -}}

{{/* Which Redis the chart uses: cluster, sentinel, url or addr (the first one set) */}}
{{- define "agentq.redisMode" -}}
{{- if .Values.redis.cluster -}}cluster
{{- else if .Values.redis.sentinel.masterName -}}sentinel
{{- else if .Values.redis.url -}}url
{{- else -}}addr
{{- end -}}
{{- end -}}

{{/* Redis as agentq.yaml's redis section (YAML) */}}
{{- define "agentq.redis" -}}
{{- $r := .Values.redis -}}
{{- $mode := include "agentq.redisMode" . -}}
{{- $out := dict -}}
{{- if eq $mode "cluster" -}}
{{- $_ := set $out "cluster" $r.cluster -}}
{{- else if eq $mode "sentinel" -}}
{{- $s := dict "master_name" $r.sentinel.masterName "addrs" $r.sentinel.addrs -}}
{{- if $r.sentinel.passwordSecret.name }}{{ $_ := set $s "password" "${AGENTQ_REDIS_SENTINEL_PASSWORD}" }}{{ end -}}
{{- $_ := set $out "sentinel" $s -}}
{{- else if eq $mode "url" -}}
{{- $_ := set $out "url" $r.url -}}
{{- else if $r.tls -}}
{{- $_ := set $out "url" (printf "rediss://%s" $r.addr) -}}
{{- else -}}
{{- $_ := set $out "addr" $r.addr -}}
{{- end -}}
{{- if and $r.tls (ne $mode "addr") }}{{ $_ := set $out "tls" (dict) }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* agentq.yaml: .Values.config with the chart's redis and worker settings */}}
{{- define "agentq.config" -}}
{{- $w := deepCopy (.Values.config.worker | default (dict)) -}}
{{- $_ := set $w "concurrency" (int .Values.worker.concurrency) -}}
{{- $_ := set $w "metrics_addr" (printf ":%d" (int .Values.worker.metricsPort)) -}}
{{- $_ := set $w "shutdown_timeout" (printf "%ds" (int .Values.worker.shutdownTimeoutSeconds)) -}}
{{- $cfg := deepCopy (omit .Values.config "worker") -}}
{{- $_ := set $cfg "worker" $w -}}
{{- $_ := set $cfg "redis" (include "agentq.redis" . | fromYaml) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Redis credentials every agentq container gets */}}
{{- define "agentq.redisEnv" -}}
{{- if .Values.redis.passwordSecret.name }}
- name: AGENTQ_REDIS_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ .Values.redis.passwordSecret.name }}, key: {{ .Values.redis.passwordSecret.key }} } }
{{- end }}
{{- if and (eq (include "agentq.redisMode" .) "sentinel") .Values.redis.sentinel.passwordSecret.name }}
- name: AGENTQ_REDIS_SENTINEL_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ .Values.redis.sentinel.passwordSecret.name }}, key: {{ .Values.redis.sentinel.passwordSecret.key }} } }
{{- end }}
{{- end -}}

{{/* Host names the dashboard answers for: its Service's in-cluster names, the ingress host, dashboard.allowedHosts */}}
{{- define "agentq.dashboardHosts" -}}
{{- $svc := printf "%s-dashboard" (include "agentq.fullname" .) -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.dashboard.clusterDomain) -}}
{{- if .Values.dashboard.ingress.enabled }}{{ $hosts = append $hosts .Values.dashboard.ingress.host }}{{ end -}}
{{- concat $hosts .Values.dashboard.allowedHosts | uniq | join "," -}}
{{- end -}}

{{/* A component's image: its own fields, else the top-level image's. Call with (dict "root" . "c" .Values.worker) */}}
{{- define "agentq.image" -}}
{{- $i := .root.Values.image -}}
{{- $c := .c.image | default (dict) -}}
image: {{ printf "%s:%s" ($c.repository | default $i.repository) ($c.tag | default $i.tag | toString) | quote }}
imagePullPolicy: {{ $c.pullPolicy | default $i.pullPolicy }}
{{- end -}}

{{/* "true" when a component runs the agentq image (its own image.repository
empty or the top-level one), whose binaries are subcommands: the chart then
passes the subcommand as args. Call with (dict "root" . "c" .Values.worker) */}}
{{- define "agentq.stockImage" -}}
{{- $r := (.c.image | default (dict)).repository -}}
{{- if or (not $r) (eq $r .root.Values.image.repository) }}true{{ end -}}
{{- end -}}

{{/* GOMEMLIMIT for a component: 90% of its resources.limits.memory, in
bytes, so that Go collects harder before the kernel kills the container;
nothing without a memory limit or when its env sets GOMEMLIMIT. Call with
(dict "c" .Values.worker "name" "worker") */}}
{{- define "agentq.goMemLimit" -}}
{{- $m := (.c.resources.limits | default (dict)).memory -}}
{{- $own := false -}}
{{- range .c.env }}{{ if eq .name "GOMEMLIMIT" }}{{ $own = true }}{{ end }}{{ end -}}
{{- if and $m (not $own) -}}
{{- $q := ternary (toString $m) (printf "%d" (int64 $m)) (kindIs "string" $m) -}}
{{- $p := regexFindAll `^([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$` $q 1 -}}
{{- if not $p -}}
{{- fail (printf "templates/%s.yaml: %s.resources.limits.memory %q is not a quantity the chart reads to set GOMEMLIMIT (digits with an optional fraction and one of Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E, e.g. 512Mi): write it so, or set GOMEMLIMIT in %s.env" .name .name $q .name) -}}
{{- end -}}
{{- $unit := regexReplaceAll "^[0-9.]+" $q "" -}}
{{- $mult := get (dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 "E" 1000000000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976) $unit -}}
{{- $bytes := mulf (float64 (trimSuffix $unit $q)) $mult -}}
- name: GOMEMLIMIT
  value: {{ printf "%d" (int64 (floor (divf (mulf $bytes 9) 10))) | quote }}
{{- end -}}
{{- end -}}

{{/* The queues the workers serve: worker.queues' names, and webhooks when they deliver webhooks */}}
{{- define "agentq.servedQueues" -}}
{{- $served := list -}}
{{- range splitList "," .Values.worker.queues }}{{ $served = append $served (first (splitList "=" .)) }}{{ end -}}
{{- if and (.Values.config.webhooks | default (dict)).secret (not (has "webhooks" $served)) }}{{ $served = append $served "webhooks" }}{{ end -}}
{{- toJson $served -}}
{{- end -}}

{{/* Values the schema cannot judge alone: each refused with one message naming the template and the value */}}
{{- define "agentq.validate" -}}
{{- $v := .Values -}}
{{- if and $v.worker.autoscaling.enabled $v.worker.keda.enabled -}}
{{- fail "templates/worker-scaling.yaml: worker.autoscaling.enabled and worker.keda.enabled both scale the worker Deployment: enable one" -}}
{{- end -}}
{{- if and $v.worker.autoscaling.enabled (gt (int $v.worker.autoscaling.minReplicas) (int $v.worker.autoscaling.maxReplicas)) -}}
{{- fail (printf "templates/worker-scaling.yaml: worker.autoscaling.minReplicas %d is above worker.autoscaling.maxReplicas %d" (int $v.worker.autoscaling.minReplicas) (int $v.worker.autoscaling.maxReplicas)) -}}
{{- end -}}
{{- if $v.worker.keda.enabled -}}
{{- if gt (int $v.worker.keda.minReplicas) (int $v.worker.keda.maxReplicas) -}}
{{- fail (printf "templates/worker-scaling.yaml: worker.keda.minReplicas %d is above worker.keda.maxReplicas %d" (int $v.worker.keda.minReplicas) (int $v.worker.keda.maxReplicas)) -}}
{{- end -}}
{{- $served := include "agentq.servedQueues" . | fromJsonArray -}}
{{- range $v.worker.keda.queues -}}
{{- if not (has . $served) -}}
{{- fail (printf "templates/worker-scaling.yaml: worker.keda.queues: %q is not a queue the workers serve (worker.queues %s): KEDA would scale them for work they do not take" . $v.worker.queues) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $mode := include "agentq.redisMode" . -}}
{{- if and (eq $mode "addr") (not $v.redis.addr) -}}
{{- fail "templates/configmap.yaml: redis.addr, redis.url, redis.sentinel or redis.cluster is required" -}}
{{- end -}}
{{- if and $v.redis.sentinel.addrs (not $v.redis.sentinel.masterName) -}}
{{- fail "templates/configmap.yaml: redis.sentinel.addrs is set without redis.sentinel.masterName" -}}
{{- end -}}
{{- if and (eq $mode "sentinel") (not $v.redis.sentinel.addrs) -}}
{{- fail "templates/configmap.yaml: redis.sentinel.masterName is set without redis.sentinel.addrs" -}}
{{- end -}}
{{- if and $v.redis.url (contains ":" (urlParse $v.redis.url).userinfo) -}}
{{- fail "templates/configmap.yaml: redis.url carries a password, which would sit in a ConfigMap (and KEDA cannot use it): put it in a Secret and name it in redis.passwordSecret" -}}
{{- end -}}
{{- range list "concurrency" "queues" "metrics_addr" "shutdown_timeout" -}}
{{- if hasKey ($v.config.worker | default (dict)) . -}}
{{- fail (printf "templates/configmap.yaml: config.worker.%s is set by the chart: use worker.%s" . (get (dict "concurrency" "concurrency" "queues" "queues" "metrics_addr" "metricsPort" "shutdown_timeout" "shutdownTimeoutSeconds") .)) -}}
{{- end -}}
{{- end -}}
{{- if $v.dashboard.enabled -}}
{{- if not $v.dashboard.tokenSecret.name -}}
{{- fail "templates/dashboard.yaml: dashboard.tokenSecret.name is required with dashboard.enabled: without a token the dashboard listens on loopback inside its pod, out of reach of its Service, its Ingress and the kubelet's probes; create a Secret holding AGENTQ_DASHBOARD_TOKEN and name it there, or set dashboard.enabled=false" -}}
{{- end -}}
{{- if and $v.dashboard.ingress.enabled (not $v.dashboard.ingress.host) -}}
{{- fail "templates/dashboard.yaml: dashboard.ingress.host is required with dashboard.ingress.enabled" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The asynq queues a queue is served as, as a JSON list: the queue itself,
or with config.queues.QUEUE.shards > 1 its shards' names (internal/shard's
rule, which helm cannot compute: worker.keda.shardNames.QUEUE, else the
chart's table files/shards.json, generated by deploy/shards_test.go, for
critical, default and low). Call with (dict "root" . "queue" QUEUE) */}}
{{- define "agentq.shardNames" -}}
{{- $v := .root.Values -}}
{{- $q := .queue -}}
{{- $n := int ((get ($v.config.queues | default (dict)) $q | default (dict)).shards | default 1) -}}
{{- $given := get ($v.worker.keda.shardNames | default (dict)) $q -}}
{{- if lt $n 2 -}}
{{- if $given -}}
{{- fail (printf "templates/worker-scaling.yaml: worker.keda.shardNames.%s: queue %q is not sharded (config.queues.%s.shards is not above 1)" $q $q $q) -}}
{{- end -}}
{{- list $q | toJson -}}
{{- else if $given -}}
{{- if ne (len $given) $n -}}
{{- fail (printf "templates/worker-scaling.yaml: worker.keda.shardNames.%s has %d names, config.queues.%s.shards is %d: print them with go run github.com/agentq/agentq/deploy/shardnames %s=%d" $q (len $given) $q $n $q $n) -}}
{{- end -}}
{{- toJson $given -}}
{{- else -}}
{{- $ks := dig $q (toString $n) "" (.root.Files.Get "files/shards.json" | fromJson) -}}
{{- if not $ks -}}
{{- fail (printf "templates/worker-scaling.yaml: config.queues.%s.shards is %d and the chart knows the shard names of critical, default and low only: set worker.keda.shardNames.%s to the output of go run github.com/agentq/agentq/deploy/shardnames %s=%d" $q $n $q $q $n) -}}
{{- end -}}
{{- $names := list -}}
{{- range $i, $k := splitList " " $ks -}}
{{- $names = append $names (ternary (printf "%s.%d" $q $i) (printf "%s.%d.%s" $q $i $k) (eq $k "0")) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}
{{- end -}}
