{{/*
The chart's name, shortened to 63 characters: a DNS label.
*/}}
{{- define "kafkatrail-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: <release>-<chart>, or the release name alone when it already holds the
chart's name (a release called kafkatrail-agent makes objects called kafkatrail-agent).
*/}}
{{- define "kafkatrail-agent.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kafkatrail-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "kafkatrail-agent.labels" -}}
helm.sh/chart: {{ include "kafkatrail-agent.chart" . }}
{{ include "kafkatrail-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ include "kafkatrail-agent.imageTag" . | quote }}
app.kubernetes.io/component: log-shipper
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels: never changed by an upgrade (a DaemonSet's selector is immutable).
*/}}
{{- define "kafkatrail-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kafkatrail-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kafkatrail-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kafkatrail-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kafkatrail-agent.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The TLS settings are in use: asked for, or implied by a Secret of CAs.
*/}}
{{- define "kafkatrail-agent.tlsEnabled" -}}
{{- if or .Values.tls.enabled .Values.tls.existingSecret }}true{{ end }}
{{- end }}

{{/*
The agent's configuration file as a dict: values' config, plus the producer properties that the
sasl and tls values imply, unless config sets them itself (the user's word wins). Refuses the
secrets a ConfigMap must not hold, and a state-dir the chart cannot mount. Rendered as YAML;
callers read it back with fromYaml.
*/}}
{{- define "kafkatrail-agent.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $producer := deepCopy (get $cfg "producer" | default dict) }}
{{- range $key := list "sasl.password" "sasl.jaas.config" "sasl.oauthbearer.client.secret" "sasl.oauthbearer.client.credentials.client.secret" }}
{{- if hasKey $producer $key }}
{{- fail (printf "config.producer.%s: a secret must not go into the ConfigMap, which anyone who can read the namespace can read; put the credentials in a Secret (sasl.existingSecret), or pass it through extraEnv from a Secret (KAFKATRAIL_PRODUCER_... with valueFrom.secretKeyRef)" $key) }}
{{- end }}
{{- end }}
{{- $tls := include "kafkatrail-agent.tlsEnabled" . }}
{{- $derived := dict }}
{{- if .Values.sasl.existingSecret }}
{{- $_ := set $derived "security.protocol" (ternary "SASL_SSL" "SASL_PLAINTEXT" (eq $tls "true")) }}
{{- $_ := set $derived "sasl.mechanism" .Values.sasl.mechanism }}
{{- else if $tls }}
{{- $_ := set $derived "security.protocol" "SSL" }}
{{- end }}
{{- if .Values.tls.existingSecret }}
{{- $dir := .Values.tls.mountPath | trimSuffix "/" }}
{{- $_ := set $derived "ssl.ca.location" (printf "%s/ca.crt" $dir) }}
{{- if .Values.tls.clientCertificate }}
{{- $_ := set $derived "ssl.certificate.location" (printf "%s/tls.crt" $dir) }}
{{- $_ := set $derived "ssl.key.location" (printf "%s/tls.key" $dir) }}
{{- end }}
{{- end }}
{{- range $key, $value := $derived }}
{{- if not (hasKey $producer $key) }}
{{- $_ := set $producer $key $value }}
{{- end }}
{{- end }}
{{- if $producer }}
{{- $_ := set $cfg "producer" $producer }}
{{- end }}
{{- $stateDir := get $cfg "state-dir" | default "" | toString }}
{{- if not (isAbs $stateDir) }}
{{- fail (printf "config.state-dir: want an absolute path (the chart mounts hostPaths.state there), got %q" $stateDir) }}
{{- end }}
{{- range $taken := list "/etc/kafkatrail" .Values.hostPaths.varLog .Values.hostPaths.dockerContainers .Values.tls.mountPath }}
{{- if and $taken (or (eq (clean $stateDir) (clean $taken)) (hasPrefix (printf "%s/" (clean $taken)) $stateDir)) }}
{{- fail (printf "config.state-dir: %s is in %s, a read-only mount" $stateDir $taken) }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
Whole seconds, rounded up, of a Go duration ("30s", "1m30s", "1.5h", "500ms"), as the agent
parses shutdown-timeout. Written with sprig's functions alone: Helm 4's durationSeconds is not
in Helm 3.
*/}}
{{- define "kafkatrail-agent.durationSeconds" -}}
{{- $s := toString . | trim }}
{{- $part := "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h)" }}
{{- if not (regexMatch (printf "^(%s)+$" $part) $s) }}
{{- fail (printf "config.shutdown-timeout: want a positive Go duration such as 30s or 1m30s, got %q" $s) }}
{{- end }}
{{- $unit := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $total := 0.0 }}
{{- range regexFindAll $part $s -1 }}
{{- $number := regexFind "^[0-9.]+" . }}
{{- $total = addf $total (mulf (float64 $number) (get $unit (trimPrefix $number .))) }}
{{- end }}
{{- ceil $total | int64 }}
{{- end }}

{{/*
terminationGracePeriodSeconds: the value, if set and not below shutdown-timeout + 10 s, else
shutdown-timeout + 15 s. After shutdown-timeout the agent still saves its checkpoints and
flushes its telemetry (at most 2 s); killed before that, its successor sends the lines since the
last checkpoint again.
*/}}
{{- define "kafkatrail-agent.terminationGracePeriodSeconds" -}}
{{- $cfg := include "kafkatrail-agent.config" . | fromYaml }}
{{- $timeout := get $cfg "shutdown-timeout" | default "30s" }}
{{- $shutdown := include "kafkatrail-agent.durationSeconds" $timeout | int64 }}
{{- /* get: "" when null (Helm drops null values), so that strict rendering passes */}}
{{- $grace := get .Values "terminationGracePeriodSeconds" }}
{{- if or (kindIs "invalid" $grace) (kindIs "string" $grace) }}
{{- add $shutdown 15 }}
{{- else if lt (int64 $grace) (add $shutdown 10) }}
{{- fail (printf "terminationGracePeriodSeconds: %v is less than config.shutdown-timeout (%s) + 10 s: Kubernetes would kill the agent before it saved its checkpoints" $grace $timeout) }}
{{- else }}
{{- int64 $grace }}
{{- end }}
{{- end }}

{{/*
Whether extraEnv names the variable given: the chart then leaves it to extraEnv (two entries of
one name are refused by server-side apply).
*/}}
{{- define "kafkatrail-agent.extraEnvHas" -}}
{{- $name := .name }}
{{- range .root.Values.extraEnv }}
{{- if eq .name $name }}true{{ end }}
{{- end }}
{{- end }}
