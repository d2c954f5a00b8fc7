{{/* The chart's name, or nameOverride. */}}
{{- define "styrmin-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object: fullnameOverride, or the release name when it already contains the
chart's name (`helm install styrmin-webhook ...` gives `styrmin-webhook`), or both joined.
*/}}
{{- define "styrmin-webhook.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "styrmin-webhook.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels the Deployment selects its pods by (never change across upgrades). */}}
{{- define "styrmin-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "styrmin-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object. helmLabels: false leaves out the two that say Helm manages the
object (the kustomize base is rendered that way: kubectl manages it).
*/}}
{{- define "styrmin-webhook.labels" -}}
{{ include "styrmin-webhook.selectorLabels" . }}
app.kubernetes.io/part-of: styrmin
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- if .Values.helmLabels }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving certificate (tls.crt, tls.key), in every mode. */}}
{{- define "styrmin-webhook.tlsSecretName" -}}
{{- $cert := .Values.certificate }}
{{- if eq $cert.mode "existingSecret" }}
{{- required "certificate.existingSecret.name is required with certificate.mode=existingSecret" $cert.existingSecret.name }}
{{- else if and (eq $cert.mode "certManager") $cert.certManager.secretName }}
{{- $cert.certManager.secretName }}
{{- else }}
{{- printf "%s-tls" (include "styrmin-webhook.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Service's DNS names: what the serving certificate must name. */}}
{{- define "styrmin-webhook.dnsNames" -}}
{{- $service := include "styrmin-webhook.fullname" . }}
- {{ printf "%s.%s.svc" $service .Release.Namespace }}
- {{ printf "%s.%s.svc.cluster.local" $service .Release.Namespace }}
{{- end }}

{{/*
The generated certificate (certificate.mode=generated) as a dict {ca, crt, key}, all PEM:
the one in the existing Secret when there is one (an upgrade keeps it: `lookup` reads the
cluster; under `helm template` it finds nothing), a new CA and serving pair otherwise.
Called once per render, from mutatingwebhookconfiguration.yaml, so that the Secret and the
caBundle come from the same CA.
*/}}
{{- define "styrmin-webhook.generatedCertificate" -}}
{{- $secretName := include "styrmin-webhook.tlsSecretName" . }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}
{{- $data := dig "data" (dict) $existing }}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") }}
{{- dict "ca" (index $data "ca.crt" | b64dec) "crt" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) | toJson }}
{{- else }}
{{- $days := int .Values.certificate.generated.validityDays }}
{{- $ca := genCA (printf "%s-ca" (include "styrmin-webhook.fullname" .)) $days }}
{{- $service := include "styrmin-webhook.fullname" . }}
{{- $names := list (printf "%s.%s.svc" $service .Release.Namespace) (printf "%s.%s.svc.cluster.local" $service .Release.Namespace) }}
{{- $cert := genSignedCert (index $names 0) nil $names $days $ca }}
{{- dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key | toJson }}
{{- end }}
{{- end }}

{{/* The namespaces never sent to the webhook: its own and the configured ones. */}}
{{- define "styrmin-webhook.excludedNamespaces" -}}
{{- $excluded := concat (list "kube-system") .Values.webhooks.excludedNamespaces (list .Release.Namespace) | uniq }}
{{- toJson $excluded }}
{{- end }}

{{/*
A PromQL label-matcher list: the given matchers and prometheusRule.selector, comma-joined,
in braces. Called with (list $ "matcher" ...).
*/}}
{{- define "styrmin-webhook.matchers" -}}
{{- $root := first . }}
{{- $matchers := concat (rest .) (list $root.Values.prometheusRule.selector) | compact }}
{{- printf "{%s}" (join "," $matchers) }}
{{- end }}

{{/*
The controllers' Deployment (`styrmin-webhook controllers`): its name, and the labels it
selects its pods by. Its app.kubernetes.io/name differs from admission's, so that admission's
Service, PodDisruptionBudget and Deployment never select a controllers pod.
*/}}
{{- define "styrmin-webhook.controllersFullname" -}}
{{- printf "%s-controllers" (include "styrmin-webhook.fullname" . | trunc 51 | trimSuffix "-") }}
{{- end }}

{{- define "styrmin-webhook.controllersSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-controllers" (include "styrmin-webhook.name" . | trunc 51 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controllers
{{- end }}

{{- define "styrmin-webhook.controllersLabels" -}}
{{ include "styrmin-webhook.controllersSelectorLabels" . }}
app.kubernetes.io/part-of: styrmin
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- if .Values.helmLabels }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}
{{- end }}

{{/* The image reference, by digest when one is set. */}}
{{- define "styrmin-webhook.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}
