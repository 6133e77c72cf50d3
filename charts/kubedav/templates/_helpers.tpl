{{/* Names */}}
{{- define "kubedav.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubedav.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "kubedav.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "kubedav.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The name of a component's objects: fullname-component (fullname alone for "all"). */}}
{{- define "kubedav.componentName" -}}
{{- if eq .component "all" -}}
{{- include "kubedav.fullname" .root -}}
{{- else -}}
{{- printf "%s-%s" (include "kubedav.fullname" .root | trunc 50 | trimSuffix "-") .component -}}
{{- end -}}
{{- end -}}

{{- define "kubedav.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kubedav.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubedav
{{- end -}}

{{/* Labels of a component: call with (dict "root" $ "component" "gateway"). */}}
{{- define "kubedav.componentLabels" -}}
{{ include "kubedav.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kubedav.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubedav.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kubedav.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kubedav.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kubedav.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Secrets */}}
{{- define "kubedav.usersSecretName" -}}
{{- default (printf "%s-users" (include "kubedav.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "kubedav.usersSecretKey" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecretKey }}{{- else -}}users{{- end -}}
{{- end -}}

{{- define "kubedav.cacheSecretName" -}}
{{- default (printf "%s-auth-cache" (include "kubedav.fullname" .)) .Values.auth.sharedCache.existingSecret -}}
{{- end -}}

{{/* Redis: "external", "bundled" or "" (none). */}}
{{- define "kubedav.redisKind" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret .Values.redis.sentinel.hosts -}}external
{{- else if .Values.redis.bundled.enabled -}}bundled
{{- end -}}
{{- end -}}

{{/* The env var holding the Redis URL, named `name`: call with (dict "root" $ "name" "KUBEDAV_LOCK_STORE"). */}}
{{- define "kubedav.redisUrlEnv" -}}
{{- $root := .root -}}
{{- if $root.Values.redis.existingSecret }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.redis.existingSecret }}
      key: {{ $root.Values.redis.existingSecretKey }}
{{- else if $root.Values.redis.url }}
- name: {{ .name }}
  value: {{ $root.Values.redis.url | quote }}
{{- else if $root.Values.redis.sentinel.hosts }}
{{- /* Behind Sentinel: the password, if any, from its Secret, spliced into the URL. */}}
{{- $sentinel := $root.Values.redis.sentinel }}
{{- $where := printf "%s/%s/%d" (join "," $sentinel.hosts) $sentinel.masterName (int $sentinel.db) }}
{{- if $sentinel.existingSecret }}
- name: {{ printf "%s_PASSWORD" .name }}
  valueFrom:
    secretKeyRef:
      name: {{ $sentinel.existingSecret }}
      key: {{ $sentinel.existingSecretKey }}
- name: {{ .name }}
  value: {{ printf "redis+sentinel://:$(%s_PASSWORD)@%s" .name $where | quote }}
{{- else }}
- name: {{ .name }}
  value: {{ printf "redis+sentinel://%s" $where | quote }}
{{- end }}
{{- else }}
{{- /* The bundled Valkey: its password from its Secret, spliced into the URL. */}}
- name: {{ printf "%s_PASSWORD" .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "kubedav.redisPasswordSecretName" $root }}
      key: {{ $root.Values.redis.bundled.auth.existingSecretKey }}
- name: {{ .name }}
  value: {{ printf "redis://:$(%s_PASSWORD)@%s:6379/0" .name (include "kubedav.componentName" (dict "root" $root "component" "redis")) | quote }}
{{- end }}
{{- end -}}

{{/* The Secret holding the bundled Valkey's password. */}}
{{- define "kubedav.redisPasswordSecretName" -}}
{{- default (printf "%s-redis" (include "kubedav.fullname" .)) .Values.redis.bundled.auth.existingSecret -}}
{{- end -}}

{{/* The Secret holding the token between the gateway and the gRPC services. */}}
{{- define "kubedav.grpcTokenSecretName" -}}
{{- default (printf "%s-grpc-token" (include "kubedav.fullname" .)) .Values.grpcAuth.existingSecret -}}
{{- end -}}

{{/* The shared gRPC token, for the gateway and every service (microservices mode). */}}
{{- define "kubedav.grpcTokenEnv" -}}
{{- if and (eq .Values.deploymentMode "microservices") .Values.grpcAuth.enabled }}
- name: KUBEDAV_GRPC_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "kubedav.grpcTokenSecretName" . }}
      key: {{ .Values.grpcAuth.existingSecretKey }}
{{- end }}
{{- end -}}

{{/* Refusals: settings that cannot work together. */}}
{{- define "kubedav.validate" -}}
{{- $redis := include "kubedav.redisKind" . -}}
{{- if eq .Values.deploymentMode "microservices" -}}
{{- if and (gt (int .Values.locks.replicas) 1) (not $redis) -}}
{{- fail (printf "locks.replicas is %d, but several locks replicas must share their locks through Redis: set redis.url (or redis.existingSecret), enable redis.bundled, or set locks.replicas to 1" (int .Values.locks.replicas)) -}}
{{- end -}}
{{- if and .Values.auth.enabled (gt (int .Values.auth.replicas) 1) (not $redis) -}}
{{- fail (printf "auth.replicas is %d, but several auth replicas need Redis to share their verifications: set redis.url (or redis.existingSecret), enable redis.bundled, or set auth.replicas to 1" (int .Values.auth.replicas)) -}}
{{- end -}}
{{- end -}}
{{- if and (include "kubedav.onS3" .) (not .Values.storage.s3.bucket) -}}
{{- fail "storage.backend is s3, but storage.s3.bucket is empty: name the bucket fileio serves" -}}
{{- end -}}
{{- if and (include "kubedav.onS3" .) (not .Values.storage.s3.existingSecret) -}}
{{- fail "storage.backend is s3, but storage.s3.existingSecret is empty: create a Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY and name it there" -}}
{{- end -}}
{{- if and (not (include "kubedav.onS3" .)) (gt (int .Values.fileio.replicas) 1) (not (include "kubedav.sharedVolume" .)) -}}
{{- fail (printf "fileio.replicas is %d on a ReadWriteOnce volume, which one pod owns: set fileio.persistence.accessModes to [ReadWriteMany] (NFS, CephFS) or storage.backend to s3" (int .Values.fileio.replicas)) -}}
{{- end -}}
{{- if and (include "kubedav.fileioReplicated" .) (not $redis) -}}
{{- fail "fileio runs as several replicas (storage.backend s3, or a ReadWriteMany volume), which need Redis for their registry and for the locks (kept in memory, locks would be a single point of failure): set redis.url (or redis.existingSecret) or enable redis.bundled" -}}
{{- end -}}
{{- if and .Values.policy.document .Values.policy.existingConfigMap -}}
{{- fail "give the access policy either in policy.document or in policy.existingConfigMap, not both" -}}
{{- end -}}
{{- if and (include "kubedav.policyConfigMap" .) (not .Values.auth.enabled) -}}
{{- fail "an access policy decides by user, so it needs auth.enabled: true" -}}
{{- end -}}
{{- if and .Values.policy.auditLog (not (include "kubedav.policyConfigMap" .)) -}}
{{- fail "policy.auditLog logs the access policy's decisions: give a policy in policy.document or policy.existingConfigMap" -}}
{{- end -}}
{{- if and .Values.auth.enabled .Values.auth.existingSecret .Values.auth.users -}}
{{- fail "give the users either in auth.users or in auth.existingSecret, not both" -}}
{{- end -}}
{{- range $workload := list "fileio" "monolithic" -}}
{{- $persistence := (index $.Values $workload).persistence -}}
{{- if and (not $persistence.enabled) $persistence.existingClaim -}}
{{- fail (printf "%s.persistence.enabled is false (an emptyDir) but %s.persistence.existingClaim names a claim: keep persistence enabled to serve the claim, or clear existingClaim" $workload $workload) -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.deploymentMode "microservices") (not (include "kubedav.onS3" .)) (not .Values.fileio.persistence.enabled) (include "kubedav.sharedVolume" .) -}}
{{- fail "fileio.persistence.enabled is false, so each fileio pod would have its own emptyDir, but ReadWriteMany asks its replicas to share one volume: enable persistence (or use storage.backend s3)" -}}
{{- end -}}
{{- end -}}

{{/* Whether fileio runs on object storage. */}}
{{- define "kubedav.onS3" -}}
{{- if eq .Values.storage.backend "s3" -}}true{{- end -}}
{{- end -}}

{{/* Whether fileio's volume is ReadWriteMany (shared by its replicas). */}}
{{- define "kubedav.sharedVolume" -}}
{{- if has "ReadWriteMany" .Values.fileio.persistence.accessModes -}}true{{- end -}}
{{- end -}}

{{/* Whether the gateways mount fileio's volume too, read only, and send large files from
     it (--fileio-volume; docs/architecture.md, "Large files from the gateway's mount"):
     microservices mode on a ReadWriteMany volume of the chart's or of yours, unless
     gateway.sendFromFileioVolume is false. A ReadWriteOnce volume is never mounted
     twice: a gateway holding it on one node would keep fileio from starting on another. */}}
{{- define "kubedav.gatewayMountsVolume" -}}
{{- if and (eq .Values.deploymentMode "microservices") (not (include "kubedav.onS3" .)) .Values.fileio.persistence.enabled (include "kubedav.sharedVolume" .) .Values.gateway.sendFromFileioVolume -}}true{{- end -}}
{{- end -}}

{{/* Whether the gateways mount the incoming area of fileio's volume read-write and write
     large bodies into it for fileio to land (--fileio-incoming; docs/architecture.md,
     "Large uploads into the gateway's mount"): microservices mode on a ReadWriteMany
     volume, unless gateway.writeIntoFileioVolume is false. */}}
{{- define "kubedav.gatewayWritesVolume" -}}
{{- if and (eq .Values.deploymentMode "microservices") (not (include "kubedav.onS3" .)) .Values.fileio.persistence.enabled (include "kubedav.sharedVolume" .) .Values.gateway.writeIntoFileioVolume -}}true{{- end -}}
{{- end -}}

{{/* The claim of fileio's shared volume (a claim of yours, or the chart's). */}}
{{- define "kubedav.fileioClaim" -}}
{{- .Values.fileio.persistence.existingClaim | default (printf "%s-data" (include "kubedav.componentName" (dict "root" . "component" "fileio"))) -}}
{{- end -}}

{{/* Whether fileio runs as a Deployment of replicas registered in Redis (microservices
     mode on a bucket, or on a ReadWriteMany volume), rather than as the one owner of a
     ReadWriteOnce volume. */}}
{{- define "kubedav.fileioReplicated" -}}
{{- if and (eq .Values.deploymentMode "microservices") (or (include "kubedav.onS3" .) (include "kubedav.sharedVolume" .)) -}}true{{- end -}}
{{- end -}}

{{/* With Redis, fileio and locks replicas register there and the gateways follow them
     (docs/architecture.md, "Many fileio replicas"): the registry's URL for all three, and
     for the replicas the address they register (`registered`: true). Call with
     (dict "root" $ "registered" true). */}}
{{- define "kubedav.registryEnv" -}}
{{- if include "kubedav.usesRedis" .root }}
{{- include "kubedav.redisUrlEnv" (dict "root" .root "name" "KUBEDAV_REGISTRY") }}
{{- if .registered }}
- name: POD_IP
  valueFrom:
    fieldRef: {fieldPath: status.podIP}
- name: KUBEDAV_ADVERTISE_ADDRESS
  value: "$(POD_IP):9090"
{{- end }}
{{- end }}
{{- end -}}

{{/* fileio's storage: the bucket's settings and credentials, or the volume's mount point. */}}
{{- define "kubedav.storageEnv" -}}
{{- if include "kubedav.onS3" . }}
{{- $s3 := .Values.storage.s3 }}
- name: KUBEDAV_STORAGE
  value: {{ printf "s3://%s/%s" $s3.bucket (trimAll "/" $s3.prefix) | trimSuffix "/" | quote }}
- name: AWS_REGION
  value: {{ $s3.region | quote }}
{{- with $s3.endpoint }}
- name: AWS_ENDPOINT_URL
  value: {{ . | quote }}
{{- end }}
{{- if ne (toString $s3.pathStyle) "" }}
- name: KUBEDAV_S3_PATH_STYLE
  value: {{ toString $s3.pathStyle | quote }}
{{- end }}
{{- if $s3.caSecret }}
- name: AWS_CA_BUNDLE
  value: /etc/kubedav/s3-ca/ca.crt
{{- end }}
- name: KUBEDAV_ABANDONED_UPLOAD_SECONDS
  value: {{ $s3.abandonedUploadSeconds | int64 | quote }}
{{- else }}
- name: KUBEDAV_ROOT
  value: /data
{{- end }}
- name: KUBEDAV_TRASH_RETENTION_DAYS
  value: {{ .Values.trash.retentionDays | int64 | quote }}
- name: KUBEDAV_VERSIONS_MAX
  value: {{ .Values.trash.versionsMax | int64 | quote }}
- name: KUBEDAV_VERSIONS_RETENTION_DAYS
  value: {{ .Values.trash.versionsRetentionDays | int64 | quote }}
{{- end -}}

{{/* Whether this release uses Redis at all (microservices with a Redis configured). */}}
{{- define "kubedav.usesRedis" -}}
{{- if and (eq .Values.deploymentMode "microservices") (include "kubedav.redisKind" .) -}}true{{- end -}}
{{- end -}}

{{/* Pod-level settings shared by every workload. */}}
{{- define "kubedav.podSpecCommon" -}}
serviceAccountName: {{ include "kubedav.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod metadata for a component: call with (dict "root" $ "component" "gateway"). */}}
{{- define "kubedav.podMetadata" -}}
labels:
  {{- include "kubedav.selectorLabels" . | nindent 2 }}
  app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with (include "kubedav.workloadValues" . | fromYaml).podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/config: {{ include (print .root.Template.BasePath "/secrets.yaml") .root | sha256sum | trunc 16 }}
  {{- with .root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with (include "kubedav.workloadValues" . | fromYaml).podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The values block of a component's workload, as YAML (fromYaml it): "all" is
monolithic's, the others their own. */}}
{{- define "kubedav.workloadValues" -}}
{{- toYaml (index .root.Values (ternary "monolithic" .component (eq .component "all"))) -}}
{{- end -}}

{{/* A workload's own pod-spec extension points, after kubedav.podSpecCommon: call with
(dict "root" $ "values" WORKLOAD-VALUES). Templates (tpl) are allowed in
topologySpreadConstraints, initContainers and sidecars' YAML; .builtinInit, the
     chart's own init containers (YAML), run before yours. */}}
{{- define "kubedav.podExtras" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- tpl (toYaml .) $.root | nindent 2 }}
{{- end }}
{{- if or .values.initContainers .builtinInit }}
initContainers:
{{- with .builtinInit }}
  {{- . | nindent 2 }}
{{- end }}
{{- with .values.initContainers }}
  {{- tpl (toYaml .) $.root | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The kubedav container's fixed parts: image, security, probes on the admin port. */}}
{{- define "kubedav.containerCommon" -}}
image: {{ include "kubedav.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.containerSecurityContext | nindent 2 }}
startupProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: admin}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end -}}

{{/* Env every kubedav container gets: call with (dict "root" $ "component" "gateway"). */}}
{{- define "kubedav.commonEnv" -}}
- name: RUST_LOG
  value: {{ .root.Values.log.level | quote }}
- name: KUBEDAV_LOG_FORMAT
  value: {{ .root.Values.log.format | quote }}
{{- if .root.Values.log.accessLog }}
- name: KUBEDAV_ACCESS_LOG
  value: "true"
{{- end }}
{{- if .root.Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .root.Values.otel.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .root.Values.otel.protocol | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "kubedav-%s" .component | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .root.Values.otel.sampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .root.Values.otel.samplerArg | quote }}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.namespace.name=%s,k8s.pod.name=$(K8S_POD_NAME),service.namespace=%s" .root.Release.Namespace .root.Release.Name | quote }}
{{- with .root.Values.otel.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The gRPC URL of a component, over its headless Service (balanced by the gateway). */}}
{{- define "kubedav.grpcUrl" -}}
{{- printf "http://%s-grpc:9090" (include "kubedav.componentName" .) -}}
{{- end -}}

{{/* How long a gRPC service of several pods keeps serving after SIGTERM. */}}
{{- define "kubedav.grpcShutdownEnv" -}}
- name: KUBEDAV_SHUTDOWN_DELAY_SECONDS
  value: {{ .Values.grpcShutdownDelaySeconds | int64 | quote }}
{{- end -}}

{{/* Settings of the HTTP edge (gateway or all). */}}
{{- define "kubedav.gatewayEnv" -}}
{{- if not .Values.auth.enabled }}
- name: KUBEDAV_ALLOW_UNAUTHENTICATED
  value: "true"
{{- end }}
- name: KUBEDAV_AUTH_REALM
  value: {{ .Values.auth.realm | quote }}
- name: KUBEDAV_ANONYMOUS_READ
  value: {{ .Values.auth.anonymousRead | quote }}
{{- with .Values.auth.readOnlyUsers }}
- name: KUBEDAV_READ_ONLY_USERS
  value: {{ join "," . | quote }}
{{- end }}
- name: KUBEDAV_MAX_BODY_BYTES
  value: {{ .Values.gateway.maxBodyBytes | int64 | quote }}
- name: KUBEDAV_SHUTDOWN_DELAY_SECONDS
  value: {{ .Values.gateway.shutdownDelaySeconds | int64 | quote }}
- name: KUBEDAV_TRUSTED_PROXIES
  value: {{ join "," .Values.gateway.trustedProxies | quote }}
- name: KUBEDAV_MAX_CONNECTIONS_PER_ADDRESS
  value: {{ .Values.gateway.maxConnectionsPerAddress | int64 | quote }}
- name: KUBEDAV_MAX_LOCK_OWNER_BYTES
  value: {{ .Values.gateway.maxLockOwnerBytes | int64 | quote }}
{{- with .Values.gateway.markdown.contentSignal }}
- name: KUBEDAV_CONTENT_SIGNAL
  value: {{ . | quote }}
{{- end }}
- name: KUBEDAV_LINKS
  value: {{ .Values.sharing.links | quote }}
- name: KUBEDAV_LINK_MAX_BYTES
  value: {{ .Values.sharing.linkMaxBytes | int64 | quote }}
{{- with .Values.sharing.admins }}
- name: KUBEDAV_ADMINS
  value: {{ join "," . | quote }}
{{- end }}
{{- end -}}

{{/* The access policy's ConfigMap, if there is a policy. */}}
{{- define "kubedav.policyConfigMap" -}}
{{- if .Values.policy.existingConfigMap -}}{{ .Values.policy.existingConfigMap }}
{{- else if .Values.policy.document -}}{{ printf "%s-policy" (include "kubedav.fullname" .) }}
{{- end -}}
{{- end -}}

{{/* --policy and --audit-log, for the processes that read the policy: the one serving
HTTP decides by it, fileio holds writes to its quotas. */}}
{{- define "kubedav.policyEnv" -}}
{{- if include "kubedav.policyConfigMap" . }}
- name: KUBEDAV_POLICY
  value: /etc/kubedav/policy/policy.yaml
{{- if .Values.policy.auditLog }}
- name: KUBEDAV_AUDIT_LOG
  value: "true"
{{- end }}
{{- end }}
{{- end -}}

{{/* The policy's mount: the directory, never a subPath, so that the kubelet's updates
reach the running process. */}}
{{- define "kubedav.policyMount" -}}
{{- if include "kubedav.policyConfigMap" . }}
- {name: policy, mountPath: /etc/kubedav/policy, readOnly: true}
{{- end }}
{{- end -}}

{{- define "kubedav.policyVolume" -}}
{{- with include "kubedav.policyConfigMap" . }}
- name: policy
  configMap:
    name: {{ . }}
    items:
      - key: {{ ternary $.Values.policy.existingConfigMapKey "policy.yaml" (ne $.Values.policy.existingConfigMap "") }}
        path: policy.yaml
{{- end }}
{{- end -}}

{{/* The identity provider, for the processes that verify credentials or offer Bearer. */}}
{{- define "kubedav.oidcEnv" -}}
{{- with .Values.auth.oidc }}
{{- if .issuer }}
- name: KUBEDAV_OIDC_ISSUER
  value: {{ .issuer | quote }}
- name: KUBEDAV_OIDC_CLIENT_ID
  value: {{ .clientId | quote }}
{{- if .audience }}
- name: KUBEDAV_OIDC_AUDIENCE
  value: {{ .audience | quote }}
{{- end }}
- name: KUBEDAV_OIDC_USERNAME_CLAIM
  value: {{ .usernameClaim | quote }}
- name: KUBEDAV_OIDC_GROUPS_CLAIM
  value: {{ .groupsClaim | quote }}
- name: KUBEDAV_OIDC_USER_PREFIX
  value: {{ .userPrefix | quote }}
- name: KUBEDAV_OIDC_SCOPES
  value: {{ .scopes | quote }}
- name: KUBEDAV_OIDC_ACCOUNT_CHECK_SECONDS
  value: {{ .accountCheckSeconds | quote }}
- name: KUBEDAV_SESSION_LIFETIME_SECONDS
  value: {{ .sessionLifetimeSeconds | quote }}
{{- end }}
{{- end }}
{{- if .Values.auth.oidc.issuer }}
{{- with (include "kubedav.publicUrl" .) }}
- name: KUBEDAV_PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The address browsers reach kubedav at: gateway.publicUrl, else the first ingress
host (https when the ingress has TLS); empty without either. */}}
{{- define "kubedav.publicUrl" -}}
{{- if .Values.gateway.publicUrl -}}
{{- .Values.gateway.publicUrl | trimSuffix "/" -}}
{{- else if and .Values.gateway.ingress.enabled .Values.gateway.ingress.hosts -}}
{{- $host := (first .Values.gateway.ingress.hosts).host -}}
{{- if .Values.gateway.ingress.tls }}https{{ else }}http{{ end }}://{{ $host }}
{{- end -}}
{{- end -}}

{{/* kubedav's client secret at the provider, for the process that signs browsers in. */}}
{{- define "kubedav.oidcClientSecretEnv" -}}
{{- if and .Values.auth.oidc.issuer .Values.auth.oidc.existingSecret }}
- name: KUBEDAV_OIDC_CLIENT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.oidc.existingSecret }}
      key: client-secret
{{- end }}
{{- end -}}

{{/* The Secret holding the key app passwords are hashed under. */}}
{{- define "kubedav.secretKeySecretName" -}}
{{- .Values.auth.secretKey.existingSecret | default (printf "%s-secret-key" (include "kubedav.fullname" .)) -}}
{{- end -}}

{{/* The secret key, for the process that keeps app passwords. */}}
{{- define "kubedav.secretKeyEnv" -}}
- name: KUBEDAV_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "kubedav.secretKeySecretName" . }}
      key: secret
{{- end -}}

{{/* The users file, for the process that verifies credentials. */}}
{{- define "kubedav.usersEnv" -}}
- name: KUBEDAV_USERS_FILE
  value: /etc/kubedav/users/users
- name: KUBEDAV_AUTH_CACHE_TTL_SECONDS
  value: {{ .Values.auth.cacheTTLSeconds | quote }}
{{- end -}}

{{- define "kubedav.usersVolume" -}}
- name: users
  secret:
    secretName: {{ include "kubedav.usersSecretName" . }}
    items:
      - key: {{ include "kubedav.usersSecretKey" . }}
        path: users
{{- end -}}

{{/* "true" when a prometheus-operator object is to be rendered: call with (list ENABLED $
the CRD's "group/version/Kind"). ENABLED is true (always), false, or "auto" (only when
the cluster has the CRD, which `helm template` cannot see). */}}
{{- define "kubedav.monitoringEnabled" -}}
{{- $enabled := index . 0 -}}{{- $root := index . 1 -}}
{{- if or (eq (toString $enabled) "true") (and (eq (toString $enabled) "auto") ($root.Capabilities.APIVersions.Has (index . 2))) -}}true{{- end -}}
{{- end -}}

{{/* The gateway's init container that waits for fileio to make the incoming area of its
     volume (kubedav await-folder), which the gateway then mounts as a subPath. */}}
{{- define "kubedav.awaitIncoming" -}}
- name: await-incoming-area
  image: {{ include "kubedav.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  securityContext:
    {{- toYaml .Values.containerSecurityContext | nindent 4 }}
  args: ["await-folder", "/data/.kubedav/incoming", "--timeout-seconds=600"]
  resources:
    requests: {cpu: 10m, memory: 16Mi}
    limits: {memory: 64Mi}
  volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
{{- end -}}
