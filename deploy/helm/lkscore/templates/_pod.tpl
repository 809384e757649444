{{/* The Deployment of one component; .root is the chart context, .component is ingest, worker or all. */}}
{{- define "lkscore.deployment" -}}
{{- $root := .root -}}
{{- $v := index $root.Values .component -}}
{{- $sel := dict "root" $root "component" .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "lkscore.fullname" $root }}-{{ .component }}
  labels:
    {{- include "lkscore.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- if eq .component "all" }}
  # One pod on one data dir: the old pod stops before the new one starts.
  replicas: 1
  {{- else if not (and (eq .component "worker") (or $v.autoscaling.keda.enabled $v.autoscaling.hpa.enabled)) }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    {{- if eq .component "all" }}
    type: Recreate
    {{- else }}
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
    {{- end }}
  selector:
    matchLabels:
      {{- include "lkscore.selector" $sel | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "lkscore.selector" $sel | nindent 8 }}
      annotations:
        checksum/config: {{ include "lkscore.config" $root | sha256sum }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "lkscore.serviceAccountName" $root }}
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      # Longer than the daemon's own shutdown deadline, so it drains before SIGKILL.
      terminationGracePeriodSeconds: {{ add $root.Values.shutdownTimeoutSeconds 10 }}
      {{- if $root.Values.topologySpread }}
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "lkscore.selector" $sel | nindent 14 }}
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "lkscore.selector" $sel | nindent 14 }}
      {{- end }}
      containers:
        - name: lkscore
          image: {{ include "lkscore.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: ["serve", "--config", "/etc/lkscore/config.yaml", "--role", "{{ .component }}"]
          ports:
            {{- if ne .component "worker" }}
            - {name: http, containerPort: 8080, protocol: TCP}
            {{- end }}
            - {name: ops, containerPort: 9090, protocol: TCP}
          env:
            {{- with dig "limits" "memory" "" ($v.resources | default dict) }}
            - name: GOMEMLIMIT
              value: {{ include "lkscore.gomemlimit" . | quote }}
            {{- end }}
            {{- if or $root.Values.dashboard.existingSecret $root.Values.dashboard.token }}
            - name: LKSCORE_DASHBOARD_TOKEN
              valueFrom: {secretKeyRef: {name: {{ include "lkscore.dashboardSecret" $root }}, key: LKSCORE_DASHBOARD_TOKEN}}
            {{- end }}
            {{- if not $root.Values.livekit.keysFileSecret }}
            - name: LIVEKIT_API_KEY
              valueFrom: {secretKeyRef: {name: {{ include "lkscore.livekitSecret" $root }}, key: LIVEKIT_API_KEY}}
            - name: LIVEKIT_API_SECRET
              valueFrom: {secretKeyRef: {name: {{ include "lkscore.livekitSecret" $root }}, key: LIVEKIT_API_SECRET}}
            {{- end }}
            {{- if and $root.Values.nats.auth.existingSecret $root.Values.nats.auth.tokenKey }}
            - name: LKSCORE_NATS_TOKEN
              valueFrom: {secretKeyRef: {name: {{ $root.Values.nats.auth.existingSecret }}, key: {{ $root.Values.nats.auth.tokenKey }}}}
            {{- end }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- if $root.Values.s3.existingSecret }}
          envFrom:
            - secretRef: {name: {{ $root.Values.s3.existingSecret }}}
          {{- end }}
          livenessProbe:
            httpGet: {path: /healthz, port: ops}
            periodSeconds: 10
            failureThreshold: 3
          readinessProbe:
            httpGet: {path: /readyz, port: ops}
            periodSeconds: 5
            failureThreshold: 2
          startupProbe:
            httpGet: {path: /healthz, port: ops}
            periodSeconds: 2
            failureThreshold: 30
          {{- with $v.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - {name: config, mountPath: /etc/lkscore/config.yaml, subPath: config.yaml, readOnly: true}
            - {name: tmp, mountPath: /tmp}
            {{- if eq .component "all" }}
            - {name: data, mountPath: /var/lib/lkscore}
            {{- end }}
            {{- if $root.Values.livekit.keysFileSecret }}
            - {name: keys, mountPath: /etc/lkscore/keys, readOnly: true}
            {{- end }}
            {{- if $root.Values.nats.auth.existingSecret }}
            - {name: nats-auth, mountPath: /etc/lkscore/nats, readOnly: true}
            {{- end }}
            {{- with $root.Values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: config
          configMap: {name: {{ include "lkscore.fullname" $root }}}
        - name: tmp
          emptyDir: {sizeLimit: 1Gi}
        {{- if eq .component "all" }}
        - name: data
          {{- if $root.Values.persistence.enabled }}
          persistentVolumeClaim: {claimName: {{ default (printf "%s-data" (include "lkscore.fullname" $root)) $root.Values.persistence.existingClaim }}}
          {{- else }}
          emptyDir: {}
          {{- end }}
        {{- end }}
        {{- if $root.Values.livekit.keysFileSecret }}
        - name: keys
          secret: {secretName: {{ $root.Values.livekit.keysFileSecret }}}
        {{- end }}
        {{- if $root.Values.nats.auth.existingSecret }}
        - name: nats-auth
          secret: {secretName: {{ $root.Values.nats.auth.existingSecret }}}
        {{- end }}
        {{- with $root.Values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
