#!/usr/bin/env bash
# The weekly capacity report's PDF: WeasyPrint (a pip package) needs Pango and a font from Debian; the PDF
# tests read it back with pdftotext (poppler-utils). Idempotent: installs only what is missing.
set -euo pipefail
missing=()
ldconfig -p | grep -q 'libpango-1.0.so.0' || missing+=(libpango-1.0-0)
ldconfig -p | grep -q 'libpangoft2-1.0.so.0' || missing+=(libpangoft2-1.0-0)
ldconfig -p | grep -q 'libharfbuzz-subset.so.0' || missing+=(libharfbuzz-subset0)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
command -v pdftotext >/dev/null || missing+=(poppler-utils)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
