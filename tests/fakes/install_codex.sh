#!/usr/bin/env bash
# Install the real codex CLI the end-to-end tests drive (tests/e2e/test_codex_seat.py) into the checkout:
# .tools/codex/node_modules/.bin/codex. Needs npm and the npm registry; the tests themselves need no network.
set -euo pipefail
cd "$(dirname "$0")/../.."
version="${CODEX_VERSION:-0.171.0}"
prefix=".tools/codex"
if [ -x "$prefix/node_modules/.bin/codex" ] && "$prefix/node_modules/.bin/codex" --version 2>/dev/null | grep -qx "codex-cli $version"; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: the codex end-to-end tests will be skipped" >&2
  exit 0
fi
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "@openai/codex@$version"
"$prefix/node_modules/.bin/codex" --version
