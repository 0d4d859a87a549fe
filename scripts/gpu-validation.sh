#!/usr/bin/env bash
# The GPU validation batch of docs/gpu-validation.md, in one command, for a
# machine with an NVIDIA GPU, its driver, and python3 with PyTorch. Read-only
# towards the card: it never changes the MIG mode or layout, clocks or the
# compute mode, and never allocates managed memory.
#
#   scripts/gpu-validation.sh --prepare DIR   build everything the batch runs into DIR
#                                             (on any amd64 machine with Go and gcc)
#   scripts/gpu-validation.sh OUTDIR          run the batch (PREBUILT=DIR: take the builds
#                                             from DIR; else build them here first)
#
# ONLY="step names" runs only those steps. Every step runs under its own timeout and the batch goes on after a failed
# step; each step's output goes to OUTDIR/gpu-validation.log, JSON results to
# OUTDIR. The exit status is the number of failed steps.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

prepare() {
  local dir=$1
  mkdir -p "$dir"
  # Stripped (-s -w): the folder travels to the GPU machine.
  go build -ldflags '-s -w' -o "$dir/tessera" ./cmd/tessera || return 1
  make intercept >/dev/null || return 1
  cp intercept/build/libtessera-intercept.so "$dir/" || return 1
  gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iintercept/src \
    -o "$dir/grantfeed" intercept/gpu-validation/grantfeed.c || return 1
  local pkg
  for pkg in arbiter/nvmlmeter arbiter/mps agent/cdi migctl; do
    go test -c -ldflags '-s -w' -o "$dir/$(basename "$pkg").test" "./$pkg" || return 1
  done
}

if [ "${1:-}" = --prepare ]; then
  [ $# -eq 2 ] || { echo "usage: $0 --prepare DIR" >&2; exit 2; }
  prepare "$2"
  exit
fi
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR  (or --prepare DIR)" >&2; exit 2; }
out=$1
mkdir -p "$out"
if [ -z "${PREBUILT:-}" ]; then
  PREBUILT=$(mktemp -d)
  prepare "$PREBUILT" || { echo "build failed" >&2; exit 1; }
fi
PREBUILT=$(cd "$PREBUILT" && pwd)
export PREBUILT root out
log=$out/gpu-validation.log
failed=0

# step NAME SECONDS COMMAND...: runs COMMAND under a timeout, logs it.
step() {
  local name=$1 secs=$2
  shift 2
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  local t0=$SECONDS
  {
    echo
    echo "=== $name (limit ${secs}s): $*"
  } >>"$log"
  # Functions run in a child bash that is given their definitions.
  timeout --kill-after=5 "$secs" bash -c "$(declare -f machine gotest daemon_up daemon_down waitjob host hostburst); \"\$@\"" step "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0))s" >>"$log"
  echo "$name: exit $rc after $((SECONDS - t0))s"
  [ $rc -eq 0 ] || failed=$((failed + 1))
}

machine() {
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_mode,mig.mode.current,mig.mode.pending --format=csv
  uname -r
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
}

# In a package's folder, as `go test` runs its tests (they find
# intercept/gpu-validation/busy.py relative to it).
gotest() {
  local pkg=$1
  shift
  (cd "$pkg" && TESSERA_GPU_TESTS=1 "$PREBUILT/$(basename "$pkg").test" -test.count=1 -test.v "$@")
}

# daemon_up starts the host daemon on this machine's real GPUs in a fresh
# state folder; daemon_down stops it.
daemon_up() {
  local state
  state=$(mktemp -d)
  export TESSERA_STATE_DIR=$state TESSERA_SOCKET=$state/s
  "$PREBUILT/tessera" up --log-level warn --intercept-lib "$PREBUILT/libtessera-intercept.so" &
  daemon=$!
  for _ in $(seq 50); do "$PREBUILT/tessera" ps >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "the daemon did not answer" >&2
  return 1
}
daemon_down() { kill "$daemon"; wait "$daemon"; }

# waitjob ID: waits up to a minute for a job to leave the running state.
waitjob() {
  for _ in $(seq 60); do
    "$PREBUILT/tessera" ps -a | grep -q "^$1 .* running " || return 0
    sleep 1
  done
}

# The host daemon with two PyTorch jobs sharing GPU 0 at 0.3 and 0.7: each
# prints its matmul rate.
host() {
  daemon_up || return 1
  local busy=$root/intercept/gpu-validation/busy.py id
  id=$("$PREBUILT/tessera" run --gpu-fraction 0.3 --gpu-memory 20Gi --detach -- python3 "$busy" 10 matmul)
  "$PREBUILT/tessera" run --gpu-fraction 0.7 --gpu-memory 20Gi -- python3 "$busy" 10 matmul
  local rc=$?
  waitjob "$id"
  echo "job $id (0.3):"
  "$PREBUILT/tessera" logs "$id"
  "$PREBUILT/tessera" ps -a
  "$PREBUILT/tessera" ps --gpus
  daemon_down
  return $rc
}

# Burst through the daemon's arbiter (real NVML meter): job A, guaranteed
# 0.25 with a 0.8 burst limit, runs alone for about 14 s (expect about 0.8 of
# the solo rate), then job B, guaranteed 0.5 with limit 1, arrives for 10 s
# (A falls back towards its guarantee, B gets at least its own), then A is
# alone again. Both print their rate every 2 s. Then the memory cap through
# the daemon: a job given 8 GiB sees 8 GiB and hits OOM there.
hostburst() {
  local busy=$root/intercept/gpu-validation/busy.py smi
  # The card's own view every second: utilisation (time a kernel ran),
  # SM clock and power, to tell a time share from a throughput share.
  nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,power.draw --format=csv -lms 1000 >"$out/host-burst-smi.csv" &
  smi=$!
  echo "solo: $(python3 "$busy" 5)"
  daemon_up || return 1
  local a rc=0
  a=$("$PREBUILT/tessera" run --gpu-fraction 0.25 --gpu-limit 0.8 --gpu-memory 8Gi --detach -- env BUSY_EVERY=2 python3 "$busy" 34)
  sleep 14
  echo "job B (0.5, limit 1):"
  "$PREBUILT/tessera" run --gpu-fraction 0.5 --gpu-limit 1 --gpu-memory 8Gi -- env BUSY_EVERY=2 python3 "$busy" 10 || rc=1
  waitjob "$a"
  echo "job $a (0.25, limit 0.8):"
  "$PREBUILT/tessera" logs "$a"
  echo "memory cap through the daemon (8 GiB):"
  "$PREBUILT/tessera" run --gpu-fraction 0.5 --gpu-memory 8Gi -- python3 "$root/intercept/gpu-validation/mem_cap.py" 8 || rc=1
  "$PREBUILT/tessera" ps -a
  daemon_down
  kill "$smi"
  return $rc
}

step machine 30 machine
step show-gpus 30 bash -o pipefail -c "'$PREBUILT/tessera' show-gpus --source local -o json | tee '$out/show-gpus.json'"
# The agent runs until stopped: exit 124 from the timeout is its normal end.
step agent-standalone 20 sh -c "timeout 10 '$PREBUILT/tessera' agent --standalone --source local >'$out/agent-standalone.json'; rc=\$?; [ \$rc -eq 124 ] || [ \$rc -eq 0 ]"
step intercept 240 intercept/gpu-validation/run.sh 8
step host-daemon 90 host
step host-burst 120 hostburst
step nvml-meter 90 gotest arbiter/nvmlmeter -test.run TestOnRealGPU
step nvml-raw 90 gotest arbiter/nvmlmeter -test.run TestRawSamplesOnRealGPU
step mps 120 gotest arbiter/mps -test.run TestOnRealMPS
step cdi 30 gotest agent/cdi -test.run TestGenerateOnThisHost
step mig-catalog 30 gotest migctl -test.run TestCatalogMatchesThisGPU
echo "failed steps: $failed (log: $log)"
exit "$failed"
