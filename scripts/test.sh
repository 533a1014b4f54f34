#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: Debian's redis-server (the real server the
# subscription tests fan out through) and chromium (the real browser of test/browser/), the locked npm
# dependencies (which bring Node 24), then vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# The browser tests drive /usr/bin/chromium (or CHROMIUM_PATH); they skip, saying so, without one.
[ -n "${CHROMIUM_PATH:-}" ] || [ -x /usr/bin/chromium ] || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "Installing ${missing[*]} from Debian's packages..."
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The documents' commands (test/operations/docs-commands.test.ts) call curl and jq, and `ip` sets up
# the network namespace they run in.
missing=""
for tool in curl:curl jq:jq ip:iproute2; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing="$missing ${tool#*:}"
done
if [ -n "$missing" ]; then
  echo "Installing$missing from Debian's packages..."
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

npm ci --no-audit --no-fund

# The JSON report gives the closing line that says, in plain words, how many tests ran.
results="$(mktemp -d)/vitest.json"
status=0
npm test -- --reporter=default --reporter=json --outputFile.json="$results" || status=$?
if [ -s "$results" ]; then
  node -e '
    const r = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
  ' "$results"
fi
exit "$status"
