#!/usr/bin/env bash
# Installs promtool (Debian's package prometheus) when it is missing, for the tests of
# deploy/prometheus's rules. Prints promtool's path. The package's service is not started
# where there is no systemd; where there is, it is stopped and disabled again: junban needs
# the tool, not a Prometheus server.
set -euo pipefail
bin=$(command -v promtool || true)
if [ -z "$bin" ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get install -y --no-install-recommends prometheus >&2 || {
    $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends prometheus >&2
  }
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl disable --now prometheus >&2 || true
  fi
  bin=$(command -v promtool)
fi
echo "$bin"
