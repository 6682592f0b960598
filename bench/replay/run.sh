#!/usr/bin/env bash
# Full rebuild of one changelog by every contender, in one run, on one local Kafka broker:
#   bench/replay/run.sh --events 1000000 --keys 100000      # small
#   bench/replay/run.sh --events 10000000 --keys 1000000    # the issue's size
# Needs the JVM jars (make jars) and Maven (the Kafka Streams peer is built on first use).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python -m bench.replay.run "$@"
