#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine, then runs all of it.
# As root (CI) the mount, FUSE, sshfs and browser tests run; elsewhere they skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="$(command -v sudo || true)"; fi
DEB_PACKAGES="sshfs openssh-server openssh-client fuse3 chromium e2fsprogs util-linux sysstat gcc nodejs npm"
missing=$(for p in $DEB_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; then
    echo "installing Debian packages: $missing"
    $SUDO apt-get update -qq
    # nodejs/npm may already come from elsewhere (NodeSource); only install what apt lacks
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      $(for p in $missing; do case $p in nodejs|npm) command -v "$p" >/dev/null || echo "$p";; *) echo "$p";; esac; done) >/dev/null
  else
    echo "warning: cannot install $missing (not root, no sudo); tests that need them will skip" >&2
  fi
fi

python -m pip install -q --upgrade pip >/dev/null
python -m pip install -q -e '.[test]'
python -m pytest "$@"
