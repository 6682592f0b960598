#!/usr/bin/env bash
# Our event processor against quixstreams, side by side on one local Kafka broker.
# Creates .venv-bench-quix (quixstreams 3.28.1) if absent; arguments go to the driver, e.g.
#   bench/processor/run.sh --events 500000 --customers 50000 --repeat 3
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python -m bench.processor.run "$@"
