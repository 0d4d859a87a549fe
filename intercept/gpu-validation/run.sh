#!/usr/bin/env bash
# GPU validation for libtessera-intercept. Needs an NVIDIA GPU, its driver,
# python3 with torch (pynvml optional), and gcc and make unless PREBUILT. Run from the repository root:
#   [PREBUILT=DIR] intercept/gpu-validation/run.sh [LIMIT_GIB]
# Prints one line per check; exits non-zero if a check fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
N=${1:-8}

# PREBUILT=DIR takes libtessera-intercept.so and grantfeed from DIR (built
# elsewhere, for a machine without a C toolchain); else both are built here.
if [ -n "${PREBUILT:-}" ]; then
  lib="$PREBUILT/libtessera-intercept.so" grantfeed="$PREBUILT/grantfeed"
else
  make -C "$here/.." BUILD="$work/build" >/dev/null
  gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$here/../src" -o "$work/grantfeed" "$here/grantfeed.c"
  lib="$work/build/libtessera-intercept.so" grantfeed="$work/grantfeed"
fi
export TESSERA_SHM_DIR="$work" TESSERA_CONTAINER_ID=validation
fail=0
check() { local name=$1; shift; if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi; }

# 1. Memory cap: sees N GiB, OOM past N, goes on; also with the VMM
#    (expandable segments) allocator and in two processes at once.
check "mem-cap-${N}GiB" env LD_PRELOAD="$lib" TESSERA_MEMORY_LIMIT="${N}Gi" python3 "$here/mem_cap.py" "$N"
check "mem-cap-vmm" env LD_PRELOAD="$lib" TESSERA_MEMORY_LIMIT="${N}Gi" \
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 "$here/mem_cap.py" "$N"

# 2. Launch overhead: tiny kernels with and without the library (gated,
#    with an effectively unlimited grant).
"$grantfeed" 30 "$work/g0:1000000000" & feed=$!
base=$(python3 "$here/busy.py" 5 launch)
gated=$(env LD_PRELOAD="$lib" TESSERA_ARBITER_REGION="$work/g0" python3 "$here/busy.py" 5 launch)
kill $feed 2>/dev/null || true
echo "launch-overhead native=$base gated=$gated"

# 3. 30/70 split: calibrate the solo rate, then feed two identical workers
#    30% and 70% of it; their throughputs should split about 30/70.
solo=$(python3 "$here/busy.py" 5 | python3 -c 'import json,sys; print(json.load(sys.stdin)["iters_per_s"])')
r30=$(python3 -c "print($solo*0.3)"); r70=$(python3 -c "print($solo*0.7)")
"$grantfeed" 25 "$work/ga:$r30" "$work/gb:$r70" & feed=$!
env LD_PRELOAD="$lib" TESSERA_ARBITER_REGION="$work/ga" python3 "$here/busy.py" 20 >"$work/a.json" &
env LD_PRELOAD="$lib" TESSERA_ARBITER_REGION="$work/gb" python3 "$here/busy.py" 20 >"$work/b.json"
wait %2 2>/dev/null || true
kill $feed 2>/dev/null || true
echo "split-30-70 solo=$solo a=$(cat "$work/a.json") b=$(cat "$work/b.json")"

# 4. Burst 25%/80%: A is guaranteed 25% and may burst to 80% while B idles.
r25=$(python3 -c "print($solo*0.25)"); r80=$(python3 -c "print($solo*0.8)")
"$grantfeed" 15 "$work/ga:$r25:$r80" "$work/gb:$r25" & feed=$!
alone=$(env LD_PRELOAD="$lib" TESSERA_ARBITER_REGION="$work/ga" python3 "$here/busy.py" 10)
kill $feed 2>/dev/null || true
echo "burst-25-80 solo=$solo a_alone=$alone (expect about 0.8 x solo)"
exit $fail
