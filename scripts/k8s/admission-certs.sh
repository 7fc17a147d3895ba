#!/usr/bin/env bash
# Make a CA and the admission webhook's serving certificate (openssl). The API server calls webhooks over
# HTTPS only and checks the certificate against the MutatingWebhookConfiguration's caBundle, so the
# certificate must name the address the API server dials: pass every DNS name / IP it may use.
#
#   scripts/k8s/admission-certs.sh OUT_DIR [NAME...]
#     NAME: DNS names or IPv4 addresses (default: gpuportal-admission.gpuportal.svc, as deploy/k8s/admission.yaml)
# Writes OUT_DIR/ca.crt, ca.key, tls.crt, tls.key (keys 0600) and prints the caBundle (base64 of ca.crt).
# Production: kubectl -n gpuportal create secret tls gpuportal-admission-tls --cert tls.crt --key tls.key
set -euo pipefail

OUT=${1:?usage: admission-certs.sh OUT_DIR [NAME...]}
shift
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(gpuportal-admission.gpuportal.svc)
DAYS=${ADMISSION_CERT_DAYS:-365}

san=""
for name in "${NAMES[@]}"; do
    if [[ $name =~ ^[0-9]+(\.[0-9]+){3}$ ]]; then san+="IP:$name,"; else san+="DNS:$name,"; fi
done
san=${san%,}

mkdir -p "$OUT"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -days "$DAYS" -subj "/CN=gpuportal-admission-ca" \
    -keyout "$OUT/ca.key" -out "$OUT/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=${NAMES[0]}" -keyout "$OUT/tls.key" -out "$OUT/tls.csr" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >"$OUT/tls.ext"
openssl x509 -req -in "$OUT/tls.csr" -CA "$OUT/ca.crt" -CAkey "$OUT/ca.key" -CAcreateserial -days "$DAYS" \
    -extfile "$OUT/tls.ext" -out "$OUT/tls.crt" 2>/dev/null
rm -f "$OUT/tls.csr" "$OUT/tls.ext" "$OUT/ca.srl"
chmod 644 "$OUT/ca.crt" "$OUT/tls.crt"
base64 -w0 "$OUT/ca.crt"
echo
