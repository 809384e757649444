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

{{/* 90% of a Kubernetes memory quantity (Ki, Mi, Gi or bytes), in bytes, for GOMEMLIMIT. */}}
{{- define "lkscore.gomemlimit" -}}
{{- $q := toString . -}}
{{- $n := 0 -}}
{{- if hasSuffix "Gi" $q -}}{{- $n = mul (trimSuffix "Gi" $q | int64) 1073741824 -}}
{{- else if hasSuffix "Mi" $q -}}{{- $n = mul (trimSuffix "Mi" $q | int64) 1048576 -}}
{{- else if hasSuffix "Ki" $q -}}{{- $n = mul (trimSuffix "Ki" $q | int64) 1024 -}}
{{- else -}}{{- $n = $q | int64 -}}
{{- end -}}
{{- div (mul $n 9) 10 -}}
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
{{- $cfg := dict "listen" ":8080" "ops_listen" ":9090" "data_dir" "/tmp/lkscore-data" "log_level" "info"
      "shutdown_timeout" (printf "%ds" (int .Values.shutdownTimeoutSeconds)) "nats" $nats "pipeline" $pipeline -}}
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
