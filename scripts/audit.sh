#!/usr/bin/env bash
# The README's main command: set up (idempotent) and run `dora audit` on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DBT_SEND_ANONYMOUS_USAGE_STATS=false
exec dora audit "$@"
