#!/usr/bin/env bash
# Run the test suite against another Warp version (default 1.13.0, the oldest supported).
#
#   tools/test_warp_versions.sh                 # warp-lang 1.13.0, whole suite
#   tools/test_warp_versions.sh 1.16.0 tests/test_record_access.py -x
#
# The venv is kept between runs (WARPTRACE_VERSIONS_VENV, default under $TMPDIR) so a
# rerun costs only the tests; Warp's kernel cache is per version, so the first run
# compiles every test kernel once.
set -euo pipefail
version="${1:-1.13.0}"
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/.."
venv="${WARPTRACE_VERSIONS_VENV:-${TMPDIR:-/tmp}/warptrace-warp-$version}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "warp-lang==$version" -e '.[test]'
"$venv/bin/python" -c "import warp; print('testing against warp-lang', warp.__version__)"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
