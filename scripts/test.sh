#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: Debian's redis-server (the real server the
# subscription tests fan out through), the locked npm dependencies (which bring Node 24), then vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "Installing redis-server from Debian's packages..."
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

npm ci --no-audit --no-fund
npm test
