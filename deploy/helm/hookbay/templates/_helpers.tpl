{{- define "hookbay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hookbay.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "hookbay.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "hookbay.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* hookbay.component: "<fullname>-<role>", for names of per-role objects. Call with (list . "ingest"). */}}
{{- define "hookbay.component" -}}
{{- printf "%s-%s" (include "hookbay.fullname" (index . 0)) (index . 1) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hookbay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookbay.name" (index . 0) }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "hookbay.labels" -}}
app.kubernetes.io/name: {{ include "hookbay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookbay
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* labels of one role's objects: (list . "ingest") */}}
{{- define "hookbay.componentLabels" -}}
{{ include "hookbay.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "hookbay.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "hookbay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hookbay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hookbay.secretName" -}}
{{- default (printf "%s-secret" (include "hookbay.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{/* Refuses to render what cannot work; every message names what to set. */}}
{{- define "hookbay.validate" -}}
{{- if and (not .Values.existingSecret) (not .Values.secretKey) -}}
{{- fail "hookbay: no secret. Set existingSecret to the name of a Secret with key `secret-key` (HOOKBAY_SECRET_KEY, >= 32 characters, e.g. `openssl rand -hex 32`), or set secretKey to have the chart create it" -}}
{{- end -}}
{{- if and (not .Values.existingSecret) (lt (len .Values.secretKey) 32) -}}
{{- fail "hookbay: secretKey must be at least 32 characters (e.g. `openssl rand -hex 32`)" -}}
{{- end -}}
{{- if and (not .Values.existingSecret) (or .Values.mongo.urlSecretKey .Values.redis.urlSecretKey) -}}
{{- fail "hookbay: mongo.urlSecretKey / redis.urlSecretKey name keys of existingSecret: set existingSecret" -}}
{{- end -}}
{{- if not .Values.kafka.bootstrap -}}
{{- fail "hookbay: set kafka.bootstrap (host:port of your Kafka brokers)" -}}
{{- end -}}
{{- if not (or .Values.mongo.url .Values.mongo.urlSecretKey) -}}
{{- fail "hookbay: set mongo.url (mongodb://host:27017/hookbay) or mongo.urlSecretKey (a key of existingSecret holding the URL with its credentials)" -}}
{{- end -}}
{{- if and .Values.ingest.enabled (or (gt (int .Values.ingest.replicaCount) 1) .Values.ingest.autoscaling.enabled) (not (or .Values.redis.url .Values.redis.urlSecretKey)) -}}
{{- fail "hookbay: ingest runs more than one replica: set redis.url (or redis.urlSecretKey) so rate limits are shared, or set ingest.replicaCount=1" -}}
{{- end -}}
{{- end -}}

{{/* HOOKBAY_* environment of every container; (list . role) where role is "" for jobs. */}}
{{- define "hookbay.env" -}}
{{- $ := index . 0 -}}
{{- $v := $.Values -}}
- name: HOOKBAY_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ index . 2 | default (include "hookbay.secretName" $) }}
      key: secret-key
- name: HOOKBAY_KAFKA_BOOTSTRAP
  value: {{ $v.kafka.bootstrap | quote }}
- name: HOOKBAY_KAFKA_PARTITIONS
  value: {{ $v.kafka.partitions | quote }}
- name: HOOKBAY_KAFKA_REPLICATION_FACTOR
  value: {{ $v.kafka.replicationFactor | quote }}
- name: HOOKBAY_KAFKA_NAMESPACE
  value: {{ $v.kafka.topicNamespace | quote }}
{{- if $v.mongo.urlSecretKey }}
- name: HOOKBAY_MONGO_URL
  valueFrom:
    secretKeyRef:
      name: {{ $v.existingSecret }}
      key: {{ $v.mongo.urlSecretKey }}
{{- else }}
- name: HOOKBAY_MONGO_URL
  value: {{ $v.mongo.url | quote }}
{{- end }}
{{- if $v.redis.urlSecretKey }}
- name: HOOKBAY_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $v.existingSecret }}
      key: {{ $v.redis.urlSecretKey }}
{{- else if $v.redis.url }}
- name: HOOKBAY_REDIS_URL
  value: {{ $v.redis.url | quote }}
{{- end }}
{{- if ne (index . 1) "migrate" }}
- name: HOOKBAY_PLANS_FILE
  value: /etc/hookbay/plans.yaml
{{- end }}
{{- with $v.settings }}
{{- if .publicUrl }}
- name: HOOKBAY_PUBLIC_URL
  value: {{ .publicUrl | quote }}
{{- end }}
- name: HOOKBAY_RETRY_SCHEDULE
  value: {{ .retrySchedule | quote }}
- name: HOOKBAY_FORWARD_TIMEOUT
  value: {{ .forwardTimeout | quote }}
- name: HOOKBAY_MAX_BODY_BYTES
  value: {{ .maxBodyBytes | int64 | quote }}
- name: HOOKBAY_ALLOW_PRIVATE_DESTINATIONS
  value: {{ .allowPrivateDestinations | quote }}
{{- if .smtpUrl }}
- name: HOOKBAY_SMTP_URL
  value: {{ .smtpUrl | quote }}
{{- end }}
- name: HOOKBAY_SMTP_FROM
  value: {{ .smtpFrom | quote }}
- name: HOOKBAY_TRUSTED_PROXIES
  value: {{ join "," .trustedProxies | quote }}
- name: HOOKBAY_LOG_LEVEL
  value: {{ .logLevel | quote }}
- name: HOOKBAY_PRODUCER_RESET_AFTER
  value: {{ .producerResetAfter | quote }}
- name: HOOKBAY_PRODUCER_WEDGED_AFTER
  value: {{ .producerWedgedAfter | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "hookbay.podSecurityContext" -}}
{{ toYaml .Values.podSecurityContext }}
{{- end -}}

{{/* volumes every pod has: /tmp (the root filesystem is read-only) and the plans file */}}
{{- define "hookbay.volumes" -}}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 64Mi
- name: plans
  configMap:
    name: {{ include "hookbay.fullname" . }}-plans
{{- end -}}

{{- define "hookbay.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: plans
  mountPath: /etc/hookbay
  readOnly: true
{{- end -}}

{{/* topologySpreadConstraints of one role: (list . "ingest") */}}
{{- define "hookbay.topologySpread" -}}
{{- $ := index . 0 -}}
{{- $role := index . 1 -}}
{{- if $.Values.topologySpread.enabled }}
topologySpreadConstraints:
{{- range $.Values.topologySpread.topologyKeys }}
  - maxSkew: {{ $.Values.topologySpread.maxSkew }}
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels: {{- include "hookbay.selectorLabels" (list $ $role) | nindent 8 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* the replicas a role may run with at least: the PDB exists only when it is > 1 */}}
{{- define "hookbay.minReplicas" -}}
{{- $cfg := index . 1 -}}
{{- if $cfg.autoscaling.enabled -}}{{ $cfg.autoscaling.minReplicas }}{{- else -}}{{ $cfg.replicaCount }}{{- end -}}
{{- end -}}
