{{/*
Names. The release name, or <release>-retwatch when it does not say
retwatch; the agent's objects add -agent: the release "retwatch" makes
retwatch-agent, as manifests/install.yaml names them.
*/}}
{{- define "retwatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 57 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 57 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "retwatch.agent" -}}
{{- printf "%s-agent" (include "retwatch.fullname" .) -}}
{{- end -}}

{{- define "retwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "retwatch.agent" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The labels every object carries. */}}
{{- define "retwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "retwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: retwatch
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* What the DaemonSet selects its pods by: never changes in an upgrade. */}}
{{- define "retwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "retwatch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
