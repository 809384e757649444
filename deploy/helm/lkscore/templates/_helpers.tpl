{{- define "lkscore.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lkscore.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lkscore.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "lkscore.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (ingest or worker). */}}
{{- define "lkscore.selector" -}}
app.kubernetes.io/name: {{ include "lkscore.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "lkscore.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lkscore.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lkscore.livekitSecret" -}}
{{- default (printf "%s-livekit" (include "lkscore.fullname" .)) .Values.livekit.existingSecret -}}
{{- end -}}

{{- define "lkscore.streamPrefix" -}}
{{- $nats := default dict .Values.config.nats -}}
{{- default "LKSCORE" $nats.stream_prefix -}}
{{- end -}}

{{/* 90% of a Kubernetes memory quantity, in bytes, for GOMEMLIMIT: plain bytes, decimal (k, M, G, T, P, E) or
     binary (Ki … Ei) suffixes, decimals allowed (1.5Gi). */}}
{{- define "lkscore.gomemlimit" -}}
{{- $q := toString . | trim -}}
{{- $units := list (list "Ki" 1024.0) (list "Mi" 1048576.0) (list "Gi" 1073741824.0) (list "Ti" 1099511627776.0) (list "Pi" 1125899906842624.0) (list "Ei" 1152921504606846976.0) (list "k" 1000.0) (list "M" 1000000.0) (list "G" 1000000000.0) (list "T" 1000000000000.0) (list "P" 1000000000000000.0) (list "E" 1000000000000000000.0) -}}
{{- $mult := 1.0 -}}
{{- $num := $q -}}
{{- range $units -}}
{{- if and (eq $mult 1.0) (hasSuffix (index . 0) $q) -}}
{{- $mult = index . 1 -}}
{{- $num = trimSuffix (index . 0) $q -}}
{{- end -}}
{{- end -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?$" $num) -}}
{{- fail (printf "resources.limits.memory %q is not a Kubernetes memory quantity" $q) -}}
{{- end -}}
{{- mulf (float64 $num) $mult 0.9 | floor | int64 -}}
{{- end -}}

{{/* Whether ingest and workers run apart: only with a store they share (S3). */}}
{{- define "lkscore.split" -}}
{{- if .Values.s3.bucket -}}true{{- end -}}
{{- end -}}

{{/* The components this release runs. */}}
{{- define "lkscore.components" -}}
{{- if include "lkscore.split" . -}}ingest worker{{- else -}}all{{- end -}}
{{- end -}}

{{/* The component whose pods serve webhooks and uploads. */}}
{{- define "lkscore.ingestComponent" -}}
{{- if include "lkscore.split" . -}}ingest{{- else -}}all{{- end -}}
{{- end -}}

{{/* The image reference: by digest when one is set. */}}
{{- define "lkscore.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "lkscore.dashboardSecret" -}}
{{- default (printf "%s-dashboard" (include "lkscore.fullname" .)) .Values.dashboard.existingSecret -}}
{{- end -}}

{{/* The lkscore config file: what the chart knows, with .Values.config merged over it. */}}
{{- define "lkscore.config" -}}
{{- $nats := dict "url" .Values.nats.url "replicas" (int .Values.nats.streamReplicas) -}}
{{- $auth := .Values.nats.auth -}}
{{- if $auth.credsKey }}{{- $_ := set $nats "creds_file" (printf "/etc/lkscore/nats/%s" $auth.credsKey) -}}{{- end -}}
{{- if $auth.nkeyKey }}{{- $_ := set $nats "nkey_file" (printf "/etc/lkscore/nats/%s" $auth.nkeyKey) -}}{{- end -}}
{{- if $auth.tlsCAKey }}{{- $_ := set $nats "tls_ca_file" (printf "/etc/lkscore/nats/%s" $auth.tlsCAKey) -}}{{- end -}}
{{- if $auth.tlsCertKey }}{{- $_ := set $nats "tls_cert_file" (printf "/etc/lkscore/nats/%s" $auth.tlsCertKey) -}}{{- end -}}
{{- if $auth.tlsKeyKey }}{{- $_ := set $nats "tls_key_file" (printf "/etc/lkscore/nats/%s" $auth.tlsKeyKey) -}}{{- end -}}
{{- $pipeline := dict "pool" .Values.worker.pool "concurrency" (int .Values.worker.concurrency) -}}
{{- if .Values.worker.closeReasons }}{{- $_ := set $pipeline "close_reasons" .Values.worker.closeReasons -}}{{- end -}}
{{- if .Values.livekit.url }}{{- $_ := set $pipeline "livekit_url" .Values.livekit.url -}}{{- end -}}
{{- $dataDir := ternary "/tmp/lkscore-data" "/var/lib/lkscore" (eq (include "lkscore.split" .) "true") -}}
{{- $cfg := dict "listen" ":8080" "ops_listen" ":9090" "data_dir" $dataDir "log_level" "info"
      "shutdown_timeout" (printf "%ds" (int .Values.shutdownTimeoutSeconds)) "shutdown_delay" (printf "%ds" (int .Values.shutdownDelaySeconds))
      "nats" $nats "pipeline" $pipeline -}}
{{- if .Values.livekit.keysFileSecret }}{{- $_ := set $cfg "livekit" (dict "keys_file" "/etc/lkscore/keys/keys.yaml") -}}{{- end -}}
{{- if .Values.s3.bucket -}}
{{- $s3 := dict "bucket" .Values.s3.bucket "force_path_style" .Values.s3.forcePathStyle -}}
{{- with .Values.s3.prefix }}{{- $_ := set $s3 "prefix" . -}}{{- end -}}
{{- with .Values.s3.region }}{{- $_ := set $s3 "region" . -}}{{- end -}}
{{- with .Values.s3.endpoint }}{{- $_ := set $s3 "endpoint" . -}}{{- end -}}
{{- $_ := set $cfg "s3" $s3 -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.config)) -}}
{{- end -}}
