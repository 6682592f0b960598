"""The event processor against quixstreams: throughput and restore, side by side on one broker
(``python -m bench.processor.run`` or ``bench/processor/run.sh``; see bench/README.md)."""
