#!/usr/bin/env bash
# Set up .venv with the pinned dependencies (once, or again when they change), then:
#   ./bootstrap.sh example   validate and run the example pipeline on embedded local Spark
#   ./bootstrap.sh test      run the test suite (extra arguments go to pytest)
set -euo pipefail
cd "$(dirname "$0")"

python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      python_bin="$candidate"; break
    fi
  done
fi
[ -n "$python_bin" ] || { echo "bootstrap: Python 3.11 is needed (set PYTHON=/path/to/python3.11)" >&2; exit 2; }
command -v java >/dev/null || { echo "bootstrap: Java 17 is needed for Spark (java not on PATH)" >&2; exit 2; }

stamp=.venv/.tributary-installed
if [ ! -x .venv/bin/python ] || [ setup.cfg -nt "$stamp" ] || [ requirements.lock -nt "$stamp" ]; then
  echo "bootstrap: installing pinned dependencies into .venv (first time takes a few minutes)" >&2
  "$python_bin" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c requirements.lock -e '.[dev]'
  touch "$stamp"
fi

# tests/test_report.py opens a report in headless Chromium: Debian's chromium package, installed
# here when missing (root and apt-get only). A failed install does not stop the tests; that test
# then fails saying chromium is missing.
install_chromium() {
  [ -e /usr/bin/chromium ] && return 0
  command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ] || return 0
  local log="${TMPDIR:-/tmp}/tributary-chromium-install.log"
  echo "bootstrap: installing chromium for tests/test_report.py (about a minute)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >"$log" 2>&1 \
    || { apt-get update -q >>"$log" 2>&1 && apt-get install -y -q chromium >>"$log" 2>&1; } \
    || echo "bootstrap: could not install chromium (see $log); tests/test_report.py will fail" >&2
}

task="${1:-example}"
shift || true
case "$task" in
  example)
    .venv/bin/tributary validate service_calls   # the others read data made by `tributary generate`
    exec .venv/bin/tributary run pipelines/service_calls.yaml --show 5 "$@"
    ;;
  test)
    install_chromium
    exec .venv/bin/python -m pytest "$@"
    ;;
  *)
    echo "usage: ./bootstrap.sh example|test [args]" >&2; exit 2
    ;;
esac
