#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine, then runs all of it.
# As root (CI) the mount, FUSE, sshfs and browser tests run; elsewhere they skip with a reason.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="$(command -v sudo || true)"; fi
# sshfs/sshd/fuse3: a real network filesystem; chromium: the browser tests; sysstat: iostat
# to check our disk numbers against; e2fsprogs: loop-device ext4; gcc: the fake NVML library;
# nodejs/npm: building the JupyterLab extension from a clone; prometheus (with promtool) and
# prometheus-node-exporter: a real Prometheus scraping the agents, our rules checked and
# unit-tested by promtool, node_exporter's names compared with ours (their services are not
# started: the tests run their own on free ports)
DEB_PACKAGES="sshfs openssh-server openssh-client fuse3 chromium e2fsprogs util-linux passwd sysstat gcc"
DEB_PACKAGES="$DEB_PACKAGES prometheus prometheus-node-exporter victoria-metrics prometheus-alertmanager"
command -v node >/dev/null || DEB_PACKAGES="$DEB_PACKAGES nodejs"
command -v npm >/dev/null || DEB_PACKAGES="$DEB_PACKAGES npm"
command -v python3 >/dev/null || DEB_PACKAGES="$DEB_PACKAGES python3 python3-venv python3-dev"
missing=$(for p in $DEB_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; then
    echo "installing Debian packages:" $missing
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
    # packages with a service (prometheus, its node exporter) may start it: the tests run their own
    for svc in prometheus prometheus-node-exporter; do
      $SUDO invoke-rc.d "$svc" stop >/dev/null 2>&1 || true
    done
  else
    echo "warning: cannot install $missing (not root, no sudo); tests that need them will skip" >&2
  fi
fi

# A Python we may install into: the active one, unless it is the system's externally managed
# interpreter (Debian's PEP 668) or lacks pip; then a virtual environment in .venv.
PY="$(command -v python || command -v python3)"
stdlib="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
if [ -z "${VIRTUAL_ENV:-}" ] && { [ -e "$stdlib/EXTERNALLY-MANAGED" ] || ! "$PY" -m pip --version >/dev/null 2>&1; }; then
  if ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -m venv .venv; then
    $SUDO apt-get install -y -qq python3-venv >/dev/null && "$PY" -m venv .venv
  fi
  # shellcheck disable=SC1091
  . .venv/bin/activate
  PY=python
fi

"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -e '.[test]'
# the TypeScript tools the suite runs (jest; ESLint, Prettier, stylelint) are js/'s devDependencies:
# installed from js/yarn.lock here even when the build above found its extension built already
if ! out="$(cd js && jlpm install 2>&1)"; then echo "$out" >&2; exit 1; fi
# Serially: only the quick tier is checked under pytest-xdist (README: pytest -m "not slow"
# -n auto); the slow tier (mounts and loop devices, sshd, Chromium, kernels, Prometheus, tests
# timed against the machine) is not, and a flaky CI costs more than the minutes it would save.
# tests/test_pythons.py runs the quick tier from the wheel on Python 3.10 and 3.13 too: it finds
# them as python3.X on PATH or under pyenv (PYENV_ROOT, ~/.pyenv); under CI=true a missing one fails
"$PY" -m pytest "$@"
