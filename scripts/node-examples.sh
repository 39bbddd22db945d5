#!/usr/bin/env bash
# Installs examples/node's npm packages (@asyncapi/parser, @aws-sdk/client-sqs), pinned by
# its package-lock.json, when they are missing: the AsyncAPI document's check and the
# Node.js producer and consumer need them (examples/node/node_test.go runs this).
# Prints the folder.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/examples/node"
if [ ! -f "$dir/node_modules/.package-lock.json" ]; then
  echo "examples/node: npm ci (pinned)" >&2
  (cd "$dir" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "$dir"
