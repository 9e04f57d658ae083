{{/*
One role's Deployment, Service, PDB and HPA. Called with a dict:
  root: the chart context; role: ingest|forwarder|recorder|stats|dashboard; cfg: .Values.<role>;
  port: the container port; portName: http|metrics; startup: true when the port opens only
  once Kafka and MongoDB answered (uvicorn binds after the app's start-up) or when the role needs
  a long start-up (stats recovers its table); startupFailureThreshold: the startup probe's
  (every 5 s; default 60, 5 minutes); env: extra env list
*/}}
{{- define "hookbay.workload" -}}
{{- $ := .root -}}
{{- $role := .role -}}
{{- $cfg := .cfg -}}
{{- $name := include "hookbay.component" (list $ $role) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "hookbay.componentLabels" (list $ $role) | nindent 4 }}
spec:
  {{- if not $cfg.autoscaling.enabled }}
  replicas: {{ $cfg.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  selector:
    matchLabels: {{- include "hookbay.selectorLabels" (list $ $role) | nindent 6 }}
  template:
    metadata:
      labels: {{- include "hookbay.componentLabels" (list $ $role) | nindent 8 }}
      annotations:
        checksum/plans: {{ toYaml $.Values.plans | sha256sum | trunc 16 }}
        {{- if not $.Values.existingSecret }}
        checksum/secret: {{ $.Values.secretKey | sha256sum | trunc 16 }}
        {{- end }}
        {{- with $cfg.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "hookbay.serviceAccountName" $ }}
      automountServiceAccountToken: false
      {{- with $.Values.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext: {{- include "hookbay.podSecurityContext" $ | nindent 8 }}
      terminationGracePeriodSeconds: {{ $cfg.terminationGracePeriodSeconds }}
      {{- include "hookbay.topologySpread" (list $ $role) | nindent 6 }}
      {{- with $cfg.nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $cfg.tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $cfg.affinity }}
      affinity: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ $role }}
          image: {{ include "hookbay.image" $ | quote }}
          imagePullPolicy: {{ $.Values.image.pullPolicy }}
          args: [{{ $role | quote }}]
          ports:
            - name: {{ .portName }}
              containerPort: {{ .port }}
              protocol: TCP
          env:
            {{- include "hookbay.env" (list $ $role "") | nindent 12 }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- with $cfg.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- if .startup }}
          # the port opens once the app's start-up reached Kafka and MongoDB: up to
          # failureThreshold x 5 s; liveness and readiness start after it
          startupProbe:
            httpGet:
              path: /healthz
              port: {{ .portName }}
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: {{ .startupFailureThreshold | default 60 }}
          {{- end }}
          # alive: a restart helps (e.g. a wedged Kafka producer turns /healthz 503)
          livenessProbe:
            httpGet:
              path: /healthz
              port: {{ .portName }}
            {{- if not .startup }}
            initialDelaySeconds: 30
            {{- end }}
            periodSeconds: 15
            timeoutSeconds: 5
            failureThreshold: 4
          # ready: its dependencies answer; out of the Service meanwhile, never restarted for it
          readinessProbe:
            httpGet:
              path: /readyz
              port: {{ .portName }}
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 2
            successThreshold: 1
          resources: {{- toYaml $cfg.resources | nindent 12 }}
          securityContext: {{- toYaml $.Values.containerSecurityContext | nindent 12 }}
          volumeMounts: {{- include "hookbay.volumeMounts" $ | nindent 12 }}
      volumes: {{- include "hookbay.volumes" $ | nindent 8 }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "hookbay.componentLabels" (list $ $role) | nindent 4 }}
  {{- with (($cfg.service | default dict).annotations) }}
  annotations: {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ ($cfg.service | default dict).type | default "ClusterIP" }}
  selector: {{- include "hookbay.selectorLabels" (list $ $role) | nindent 4 }}
  ports:
    {{- if $cfg.service }}
    - name: http
      port: {{ $cfg.service.port }}
      targetPort: {{ .portName }}
      protocol: TCP
    {{- else }}
    - name: metrics
      port: {{ .port }}
      targetPort: metrics
      protocol: TCP
    {{- end }}
{{- if gt (int (include "hookbay.minReplicas" (list $ $cfg))) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "hookbay.componentLabels" (list $ $role) | nindent 4 }}
spec:
  maxUnavailable: {{ $cfg.pdb.maxUnavailable }}
  selector:
    matchLabels: {{- include "hookbay.selectorLabels" (list $ $role) | nindent 6 }}
{{- end }}
{{- if $cfg.autoscaling.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "hookbay.componentLabels" (list $ $role) | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $name }}
  minReplicas: {{ $cfg.autoscaling.minReplicas }}
  maxReplicas: {{ $cfg.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $cfg.autoscaling.targetCPUUtilizationPercentage }}
{{- end }}
{{- end -}}
