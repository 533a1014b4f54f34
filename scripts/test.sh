#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: Debian's redis-server (the real server the
# subscription tests fan out through) and chromium (the real browser of test/browser/), the locked npm
# dependencies (which bring Node 24), then vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's packages the tests need, each installed only where its command is missing: redis-server;
# chromium (the browser tests drive /usr/bin/chromium, or CHROMIUM_PATH, and skip, saying so, without
# one); curl, jq and iproute2's `ip` for the documents' commands (test/operations/docs-commands.test.ts).
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -n "${CHROMIUM_PATH:-}" ] || [ -x /usr/bin/chromium ] || missing+=(chromium)
for tool in curl:curl jq:jq ip:iproute2; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "Installing ${missing[*]} from Debian's packages..."
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
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
