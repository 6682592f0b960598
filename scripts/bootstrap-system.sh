#!/usr/bin/env bash
# Installs the system prerequisites the project needs and the machine lacks: a JDK 17+ and Maven
# (Kafka broker, Spark), Python 3.11+ with venv. Debian/Ubuntu with root (or sudo); elsewhere it
# says what to install. Idempotent: it installs nothing that is already there.
set -euo pipefail

need=()
java_major() { java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -n1; }
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then need+=(openjdk-17-jdk-headless); fi
command -v mvn >/dev/null || need+=(maven)
python3 -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null || need+=(python3 python3-venv)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
# The server binaries cdc/runtime/postgres.py runs (pg_ctlcluster alone may come without them).
pg_server() {
  for bin in /usr/lib/postgresql/*/bin; do
    [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && [ -x "$bin/postgres" ] && [ -x "$bin/pg_isready" ] && return 0
  done
  return 1
}
for extra in "$@"; do
  case "$extra" in
    postgresql) pg_server || need+=(postgresql) ;;
    # mypyc's build of the hot path (make compiled): a C compiler, the Python and zlib headers.
    compiler)
      command -v cc >/dev/null || need+=(gcc)
      [ -e /usr/include/zlib.h ] || need+=(zlib1g-dev)
      python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || need+=(python3-dev) ;;
  esac
done

[ ${#need[@]} -eq 0 ] && exit 0
echo "bootstrap: installing ${need[*]}"
if ! command -v apt-get >/dev/null; then
  echo "bootstrap: please install ${need[*]} with your package manager, then re-run" >&2
  exit 1
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
