#!/usr/bin/env bash
# The README's test command: set up (idempotent) and run the whole suite offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DBT_SEND_ANONYMOUS_USAGE_STATS=false
exec python -m pytest -q "$@"
