#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: Debian's redis-server (the real server the
# subscription tests fan out through) and chromium (the real browser of test/browser/), the locked npm
# dependencies (which bring Node 24) unless node_modules already holds them, then vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's packages the tests need, each installed only where its command is missing: redis-server
# (also the Sentinels of the failover tests, as `redis-server <conf> --sentinel`: no redis-sentinel package);
# chromium (the browser tests drive /usr/bin/chromium, or CHROMIUM_PATH, and skip, saying so, without
# one); curl, jq and iproute2's `ip` for the documents' commands (test/operations/docs-commands.test.ts);
# kubectl, which renders deploy/kubernetes for its schema validation (kubernetes-manifests.test.ts).
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -n "${CHROMIUM_PATH:-}" ] || [ -x /usr/bin/chromium ] || missing+=(chromium)
for tool in curl:curl jq:jq ip:iproute2 kubectl:kubectl; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "Installing ${missing[*]} from Debian's packages..."
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The locked dependencies, installed only when node_modules was not installed from this very
# package.json and package-lock.json (a stamp of both, written after a successful install): a second
# run starts the tests at once instead of reinstalling for minutes. Before installing, one look at the
# registry with a short timeout, so that a registry out of reach is one clear line, not a silent hang
# (npm retries for minutes).
stamp=node_modules/.installed-from-lockfile
wanted="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
  echo "node_modules matches package-lock.json: npm ci skipped"
else
  registry="$(npm config get registry 2>/dev/null)"
  if ! timeout 30 npm ping --fetch-retries=0 --fetch-timeout=20000 >/dev/null 2>&1; then
    echo "scripts/test.sh: the npm registry (${registry}) cannot be reached, and node_modules does not match package-lock.json: cannot install the dependencies." >&2
    exit 1
  fi
  npm ci --no-audit --no-fund
  echo "$wanted" > "$stamp"
fi

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
