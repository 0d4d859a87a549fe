#!/usr/bin/env bash
# The README's main command (make run): start the host daemon on a throwaway
# state folder (real GPUs through NVML, else simulated 8xH200 with a banner),
# run a sample job on a quarter of a GPU that may burst to half, show the live
# GPU shares, and shut the daemon down. Exits with the job's exit code.
set -euo pipefail
bin=${1:-bin/tessera}
state=$(mktemp -d)
export TESSERA_STATE_DIR=$state TESSERA_SOCKET=$state/tessera.sock
"$bin" up --log-level warn &
daemon=$!
cleanup() { kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -rf "$state"; }
trap cleanup EXIT
for _ in $(seq 1 100); do "$bin" ps >/dev/null 2>&1 && break; sleep 0.1; done
rc=0
"$bin" run --gpu-fraction 0.25 --gpu-limit 0.5 -- sh -c \
  'echo "job on $CUDA_VISIBLE_DEVICES: compute $TESSERA_COMPUTE_REQUEST (burst to $TESSERA_COMPUTE_LIMIT), memory $TESSERA_MEMORY_LIMIT"' || rc=$?
"$bin" ps --gpus
exit "$rc"
