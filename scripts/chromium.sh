#!/usr/bin/env bash
# Installs Debian's chromium when it is missing, for the console's browser tests
# (tools/consolebrowser). Prints the browser's path.
set -euo pipefail
bin=${JUNBAN_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$bin" ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get install -y --no-install-recommends chromium >&2 || {
    $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends chromium >&2
  }
fi
echo "$bin"
