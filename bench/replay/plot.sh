#!/usr/bin/env bash
# The replay benchmark's plot from a result JSON, in a bench-only venv with matplotlib:
#   bench/replay/plot.sh bench/results/replay-1000k-<time>.json bench/replay-1m.png
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! .venv-bench/bin/python -c "import matplotlib" 2>/dev/null; then
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install -q matplotlib
fi
exec .venv-bench/bin/python bench/replay/plot.py "$@"
