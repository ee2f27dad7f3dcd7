{{/* Names and labels shared by every manifest. */}}
{{- define "gitreg.fullname" -}}
{{- printf "%s-gitreg" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gitreg.selectorLabels" -}}
app.kubernetes.io/name: gitreg
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gitreg.labels" -}}
{{ include "gitreg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
Refuse values that would deploy a broken registry. Several replicas each with
their own SQLite index and blob directory would be several registries behind
one name, so more than one replica needs PostgreSQL, S3 and the shared secret
key (docs/scale-out.md).
*/}}
{{- define "gitreg.validate" -}}
{{- if gt (int .Values.replicaCount) 1 -}}
{{- if not (and .Values.database.url .Values.blobStore.url .Values.secretKey.existingSecret) -}}
{{- fail "replicaCount > 1 needs database.url (PostgreSQL), blobStore.url (S3) and secretKey.existingSecret: replicas with their own index and blobs would each be a different registry (docs/scale-out.md)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.database.url (not .Values.secretKey.existingSecret) -}}
{{- fail "database.url needs secretKey.existingSecret: replicas share signing keys and webhook secrets through the database, sealed with that key" -}}
{{- end -}}
{{- end -}}
