"""Compute worker for the split and burst checks.
Runs fixed-size matmuls for SECONDS and prints iterations per second, so
two workers under different grants can be compared.
  python3 busy.py SECONDS [launch]
With "launch", times a loop of tiny kernels instead and prints the mean
microseconds per launch (the overhead check). With BUSY_EVERY=S in the
environment, the matmul loop also prints its rate over each S seconds to
stderr ({"t": seconds since start, "iters_per_s": ...}), so a change of
share during the run shows."""
import json
import os
import sys
import time

import torch

seconds = float(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else "matmul"
torch.cuda.init()
if mode == "launch":
    x = torch.zeros(1, device="cuda")
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            x.add_(1)
        n += 1000
    torch.cuda.synchronize()
    print(json.dumps({"us_per_launch": (time.perf_counter() - t0) * 1e6 / n}))
else:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    every = float(os.environ.get("BUSY_EVERY", "0"))
    n, t0 = 0, time.perf_counter()
    wn, wt = 0, t0
    while time.perf_counter() - t0 < seconds:
        a @ a
        n += 1
        if n % 16 == 0:
            torch.cuda.synchronize()
            now = time.perf_counter()
            if every > 0 and now - wt >= every:
                print(json.dumps({"t": round(now - t0, 1), "iters_per_s": (n - wn) / (now - wt)}), file=sys.stderr, flush=True)
                wn, wt = n, now
    torch.cuda.synchronize()
    print(json.dumps({"iters_per_s": n / (time.perf_counter() - t0)}))
