"""Memory cap check under libtessera-intercept (run on an H200: docs/gpu-validation.md).

Run with LD_PRELOAD set and TESSERA_MEMORY_LIMIT=<N>Gi (see run.sh):
  python3 mem_cap.py N
Checks: torch sees N GiB total (cudaMemGetInfo); allocating 256 MiB blocks
stops with torch.cuda.OutOfMemoryError at <= N GiB; the process goes on
(frees, allocates again); NVML (if pynvml is installed) reports N GiB.
Prints one JSON line; exits 1 on a failed check."""
import json
import sys

import torch

GIB = 1 << 30
BLOCK = 256 << 20
limit = float(sys.argv[1]) * GIB
out = {"limit": limit}
ok = True

free, total = torch.cuda.mem_get_info()
out.update(total=total, free=free)
ok &= abs(total - limit) < (1 << 20)

blocks = []
try:
    while len(blocks) * BLOCK < 4 * limit:
        blocks.append(torch.empty(BLOCK, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    out["oom"] = True
out["allocated"] = len(blocks) * BLOCK
ok &= out.get("oom", False) and out["allocated"] <= limit

del blocks
torch.cuda.empty_cache()
again = torch.empty(BLOCK, dtype=torch.uint8, device="cuda")  # still usable
out["after_oom"] = int(again.numel())

try:
    import pynvml

    pynvml.nvmlInit()
    mem = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
    out["nvml_total"] = mem.total
    ok &= abs(mem.total - limit) < (1 << 20)
except ImportError:
    out["nvml_total"] = None

out["ok"] = bool(ok)
print(json.dumps(out))
sys.exit(0 if ok else 1)
