"""PyTorch's CPU scaled_dot_product_attention, timed as attnbench times flashgo.

attnbench compare runs this script (embedded in the attnbench binary) once a
round with the cases of the round as JSON on stdin, a list of objects:

    {"shape": "P1", "batch": 1, "heads": 32, "kv_heads": 8, "dim": 128,
     "nq": 1024, "nkv": 1024, "causal": true, "scale": 0.0883883,
     "dtype": "float32" | "float16" | "bfloat16", "threads": 1,
     "reps": 5, "copies": 1}

and reads one JSON object a line on stdout for each, in order:

    {"shape": "P1", "dtype": "float32", "threads": 1, "ms": [..., reps times]}

after a first line {"torch": VERSION, "python": VERSION}. A causal shape with
nq < nkv is aligned to the bottom right (query i sees key j iff
j <= i + nkv - nq), as flashgo's default, through an explicit mask; with
nq == nkv it is is_causal. Grouped-query heads use enable_gqa. copies > 1
rotates the timed runs over that many copies of K and V (cold decode: the
driver sizes them to exceed twice the last-level cache, as attnbench does).
Each case runs once untimed, then reps times.
"""
import json
import platform
import sys
import time

import torch
import torch.nn.functional as F


def run_case(c):
    dt = getattr(torch, c["dtype"])
    torch.set_num_threads(c["threads"])
    b, hq, hkv, d, nq, nkv = c["batch"], c["heads"], c["kv_heads"], c["dim"], c["nq"], c["nkv"]
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(b, hq, nq, d, generator=gen).to(dt)
    copies = max(1, c["copies"])
    ks = [torch.randn(b, hkv, nkv, d, generator=gen).to(dt) for _ in range(copies)]
    vs = [torch.randn(b, hkv, nkv, d, generator=gen).to(dt) for _ in range(copies)]
    mask, causal = None, False
    if c["causal"] and nq > 1:
        if nq == nkv:
            causal = True
        else:
            i = torch.arange(nq).unsqueeze(1)
            j = torch.arange(nkv).unsqueeze(0)
            mask = j <= i + (nkv - nq)
    kw = {"scale": c["scale"]}
    if hq != hkv:
        kw["enable_gqa"] = True
    state = {"i": 0}

    def step():
        n = state["i"] % copies
        state["i"] += 1
        return F.scaled_dot_product_attention(q, ks[n], vs[n], attn_mask=mask, is_causal=causal, **kw)

    step()
    ms = []
    for _ in range(c["reps"]):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def main():
    cases = json.load(sys.stdin)
    print(json.dumps({"torch": torch.__version__, "python": platform.python_version()}), flush=True)
    for c in cases:
        ms = run_case(c)
        print(json.dumps({"shape": c["shape"], "dtype": c["dtype"], "threads": c["threads"], "ms": ms}), flush=True)


if __name__ == "__main__":
    main()
