#!/usr/bin/env bash
# The README's test command: installs what the suite needs, then runs it.
#   - Debian's chromium + chromium-driver for the web board's browser tests (apt, as root
#     or through sudo; skipped when both are already on PATH);
#   - the package with its test extra (CPU torch pinned by constraints.txt);
# then pytest over tests/. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
python3 -m pip install -q -c constraints.txt -e '.[test]'
exec python3 -m pytest -q tests "$@"
