#!/usr/bin/python3
"""PyTorch side of `gflow bench`: the same model, batch and thread count, timed the way a public
reproduction trains it (plain fp32 eager, torch.optim.AdamW, clip_grad_norm_, dropout on).

  /usr/bin/python3 tools/bench_torch.py RECIPE [--steps N] [--warmup W] [--threads T]
                                        [--seq-len L] [--batch B] [--set section.key=value]...

Reads the recipe INI itself (following `[run] base = ...`), builds the model with
tools/torch_ref.py's build_model, trains on random tokens and prints the same `key: value`
fields as `gflow bench` (the by-op-family split is gflow-only). MFU is against a 2048^3
torch.matmul timed first in the same process.
"""
import argparse
import configparser
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import ModelConfig, build_model, n_params  # noqa: E402


def load_recipe(path, sets):
    """Flat {section.key: value} after base files, the file itself and --set overrides."""
    def read(p, seen):
        p = os.path.abspath(p)
        if p in seen:
            raise SystemExit(f"bench_torch: recipe base cycle at {p}")
        cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"), interpolation=None)
        with open(p) as f:
            cp.read_file(f)
        out = {}
        if cp.has_option("run", "base"):
            out.update(read(os.path.join(os.path.dirname(p), cp.get("run", "base")), seen | {p}))
        for sec in cp.sections():
            for k, v in cp.items(sec):
                out[f"{sec}.{k}"] = v.strip()
        return out
    kv = read(path, frozenset())
    for s in sets:
        k, _, v = s.partition("=")
        kv[k.strip()] = v.strip()
    return kv


def ints(s):
    return [int(x) for x in s.replace(" ", "").split(",") if x]


def model_cfg(kv, L):
    g = kv.get
    return ModelConfig(
        family=g("model.family", "grassmann"), block=g("model.block", "post_ln"),
        V=int(g("tokenizer.vocab_size", 30522)), d=int(g("model.d_model", 256)), r=int(g("model.r", 32)),
        dff=int(g("model.d_ff", 1024)), heads=int(g("model.heads", 4)), n_layers=int(g("model.n_layers", 6)),
        Lmax=max(L, int(g("model.max_len", 0) or 0)), dropout=float(g("model.dropout", 0.1)),
        offsets=ints(g("model.offsets", "1,2,4,8,12,16")), offset_schedule=ints(g("model.offset_schedule", "")),
        normalize=g("model.normalize", "true").lower() in ("1", "true", "yes"),
        gate=g("model.gate", "true").lower() in ("1", "true", "yes"),
        plucker=g("model.plucker", "true").lower() in ("1", "true", "yes"))


def flops_per_token(c, L):
    """gf_lm_flops_per_token (src/nn/lm.c), the same formula so both sides report the same FLOPs."""
    D, F, V, R = c.d, c.dff, c.V, c.r
    P = R * (R - 1) / 2
    if c.family == "grassmann":
        m = 1.0 if c.offset_schedule else float(len(c.offsets))
        layer = D * R + (m * 2 * P if c.plucker else R * P) + P * D + (2 * D * D if c.gate else 0) + 2 * D * F
    else:
        layer = 3 * D * D + D * D + 2 * D * F + L * D
    return 2.0 * (c.n_layers * layer + D * V)


def matmul_peak(n=2048):
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = 1e30
    for rep in range(4):
        t0 = time.perf_counter()
        a @ b.t()
        dt = time.perf_counter() - t0
        if rep:
            best = min(best, dt)
    return 2.0 * n ** 3 / best * 1e-9


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("recipe")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--peak-n", type=int, default=2048)
    a = ap.parse_args(argv)
    kv = load_recipe(a.recipe, a.set)
    L = a.seq_len or int(kv.get("data.seq_len", 128))
    B = a.batch or int(kv.get("train.batch_size", 32))
    T = a.threads or int(kv.get("run.threads", 0) or 0) or os.cpu_count()
    torch.set_num_threads(T)
    torch.manual_seed(int(kv.get("run.seed", 1) or 1))
    cfg = model_cfg(kv, L)
    peak = matmul_peak(a.peak_n) if a.peak_n > 0 else 0.0

    model = build_model(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=float(kv.get("optim.lr", 1e-3)),
                            betas=(float(kv.get("optim.beta1", 0.9)), float(kv.get("optim.beta2", 0.999))),
                            weight_decay=float(kv.get("optim.weight_decay", 0.01)))
    clip = float(kv.get("optim.clip", 0) or 0) or 1.0  # as gflow bench: always pay for the norm
    tf = tb = to = 0.0
    loss = None
    for it in range(a.warmup + a.steps):
        win = torch.randint(0, cfg.V, (B, L + 1))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, _ = model.loss(win)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        t3 = time.perf_counter()
        if it >= a.warmup:
            tf, tb, to = tf + t1 - t0, tb + t2 - t1, to + t3 - t2
    n = a.steps
    per = (tf + tb + to) / n
    tok = B * L
    fpt = flops_per_token(cfg, L)
    gf = 3.0 * fpt * tok / per * 1e-9
    print(f"bench_torch: {a.recipe} family={cfg.family} block={cfg.block} layers={cfg.n_layers} d={cfg.d} "
          f"V={cfg.V} L={L} B={B} threads={torch.get_num_threads()} torch={torch.__version__}")
    print(f"params: {n_params(model)}")
    print(f"steps: {n} (after {a.warmup} warmup)")
    print(f"loss_last: {loss.item():.4f}")
    print(f"tokens_per_s: {tok / per:.1f}")
    print(f"ms_per_step: {1e3 * per:.1f}")
    print(f"ms_forward: {1e3 * tf / n:.1f}")
    print(f"ms_backward: {1e3 * tb / n:.1f}")
    print(f"ms_optimizer: {1e3 * to / n:.1f}")
    print(f"flops_per_token_fwd: {fpt:.4g}")
    print(f"flops_per_step_train: {3.0 * fpt * tok:.4g}")
    print(f"achieved_gflops: {gf:.1f}")
    if peak > 0:
        print(f"sgemm_peak_gflops: {peak:.1f} ({a.peak_n}^3 torch.matmul)")
        print(f"mfu_pct: {100.0 * gf / peak:.1f}")
    print(f"peak_rss_mb: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.1f}")


if __name__ == "__main__":
    main()
