#!/usr/bin/python3
"""PyTorch side of `gflow bench`: the same model, batch and thread count, timed the way a public
reproduction trains it (plain fp32 eager, torch.optim.AdamW, clip_grad_norm_, dropout on).

  /usr/bin/python3 tools/bench_torch.py RECIPE [--steps N] [--warmup W] [--threads T]
                                        [--seq-len L] [--batch B] [--set section.key=value]...

Reads the recipe INI itself (following `[run] base = ...`), builds the model with
tools/torch_ref.py's build_model, trains on random tokens and prints the same `key: value`
fields as `gflow bench` (the by-op-family split is gflow-only). MFU is against a 2048^3
torch.matmul timed first in the same process.

  python3 tools/bench_torch.py RECIPE --device cuda [--mode eager|compile|both] [--compile]
                               [--compile-mode M] [--attn auto|sdpa|manual] [--tf32] [...]

The side of `gflow bench RECIPE --set run.device=cuda`: the same model and step on the GPU,
eager and/or torch.compile'd (default both, one block of fields each, eager first; --compile
alone: compiled only). The compiled function is the loss (forward and cross-entropy; backward
through AOTAutograd); zero_grad, clip_grad_norm_ and AdamW (its default implementation) stay
eager. The batch is drawn on the host and copied to the GPU inside the forward phase, as gflow
uploads its batch. Phases are timed with CUDA events, the host waiting once at the end of each
step; the --warmup steps are not timed (warmup_s reports them: compilation happens there, so
--warmup must be >= 1 with compile). The Transformer's attention goes through
F.scaled_dot_product_attention (fused kernels; --attn auto = sdpa on the GPU when this torch has
it, checked against the reference attention first); on the CPU it stays torch_ref's.
MFU is against an 8192^3 torch.matmul (FP32; --tf32 allows TF32 for it and for the model)
timed first; peak_device_mb is torch.cuda.max_memory_allocated over the timed steps.

  /usr/bin/python3 tools/bench_torch.py RECIPE --generate [--n N] [--recompute-max C]
                                        [--threads T] [--set section.key=value]...

The side of `gflow bench RECIPE --generate`: generation speed at contexts 16, 32, ... and the
model's max_len, for the recipe's family and then the other one at the same shape (random
weights, eval mode, no_grad), decoded the way people decode them today:
  Transformer  impl=torch-kvcache: HF-style past keys/values per layer, concatenated each step
               (kv_forward below, the TransformerLM's own modules); state_mb = the KV cache.
  Grassmann    impl=torch-recompute: every step a full forward over the context (truncated to
               max_len), the last position's logits; state_mb = the token window.
Prefill: one forward over ctx tokens (one row, shared by the N rows). Decode: prefill ctx - S
untimed, then S = min(32, ctx/2) timed steps of N rows ending at ctx; decode_tok_s = N / step.
recompute_ms_per_token: one full forward with all (ctx, V) logits, up to ctx C (default 512).
Every figure is a mean over >= 0.3 s and >= 2 reps; threads default to [run] threads or 2.
Before timing, the KV-cache logits are checked against the full forward's (max rel err 1e-4).
"""
import argparse
import configparser
import dataclasses
import gc
import importlib
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import CausalSelfAttention, ModelConfig, build_model, n_params  # noqa: E402


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


def matmul_peak(n=2048, device="cpu"):
    if device != "cpu":
        return matmul_peak_cuda(n, device)
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = 1e30
    for rep in range(4):
        t0 = time.perf_counter()
        a @ b.t()
        dt = time.perf_counter() - t0
        if rep:
            best = min(best, dt)
    return 2.0 * n ** 3 / best * 1e-9


def matmul_peak_cuda(n, device, reps=5):
    """Best of reps CUDA-event-timed a @ b.t() after two untimed ones (random FP32 operands)."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b.t()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = 1e30
    for _ in range(reps):
        e0.record()
        a @ b.t()
        e1.record()
        e1.synchronize()
        best = min(best, 1e-3 * e0.elapsed_time(e1))
    del a, b
    torch.cuda.empty_cache()
    return 2.0 * n ** 3 / best * 1e-9


# ----------------------------------------------------------------------------------------------
# --device cuda


class SDPAAttention(CausalSelfAttention):
    """torch_ref's CausalSelfAttention through F.scaled_dot_product_attention: the same math
    (scale 1/sqrt(hd), causal, no dropout on the probabilities), fused kernels on a GPU."""

    def forward(self, x):
        B, L, d = x.shape
        # qkv's columns are [q; k; v], each H heads of hd: (B, L, 3, H, hd) -> (3, B, H, L, hd)
        qkv = self.qkv(x).view(B, L, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)  # (B, H, L, hd)
        return self.proj(y.transpose(1, 2).reshape(B, L, d))


def use_sdpa(model):
    """Switch every attention module of model to SDPAAttention (same parameters); returns how many."""
    n = 0
    for m in model.modules():
        if type(m) is CausalSelfAttention:
            m.__class__ = SDPAAttention
            n += 1
    return n


def check_sdpa(cfg, device, tol=1e-4):
    """SDPA attention == torch_ref's on one small batch of a Transformer of cfg's shape (eval)."""
    model = build_model(dataclasses.replace(cfg, family="transformer")).to(device).eval()
    ids = torch.randint(0, cfg.V, (2, min(cfg.Lmax, 64)), device=device)
    with torch.no_grad():
        want = model(ids)
        use_sdpa(model)
        got = model(ids)
    err = (got - want).abs().max().item() / want.abs().max().item()
    print(f"check: sdpa attention {'matches' if err <= tol else 'DIFFERS FROM'} the reference attention "
          f"(max rel err {err:.1e})")
    if err > tol:
        raise SystemExit(1)


def driver_release():
    """The NVIDIA kernel module's release ("580.159.04"), or "?"."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            line = f.readline()
    except OSError:
        return "?"
    rest = line.split("Module", 1)[1].split() if "Module" in line else []
    return rest[0] if rest else "?"


def gpu_line(device):
    p = torch.cuda.get_device_properties(device)
    return (f"gpu: {p.name} (cc {p.major}.{p.minor}, {p.total_memory / 2 ** 30:.1f} GiB, driver {driver_release()}, "
            f"torch {torch.__version__} with CUDA {torch.version.cuda})")


class Clock:
    """Phase marks: host perf_counter on the CPU; on a GPU CUDA events on the current stream, the
    host waiting for the step's last mark only (phases() returns seconds per phase)."""

    def __init__(self, device):
        self.cuda = device != "cpu"

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def phases(self, marks):
        if not self.cuda:
            return [b - a for a, b in zip(marks, marks[1:])]
        marks[-1].synchronize()
        return [1e-3 * a.elapsed_time(b) for a, b in zip(marks, marks[1:])]

# ----------------------------------------------------------------------------------------------
# --generate


def kv_forward(model, idx, past=None):
    """TransformerLM forward over new tokens idx (B, n) that follow the cached positions.
    past: per layer (k, v), each (B, H, P, hd), as HF's past_key_values; returns the logits
    (B, n, V) and the cache extended by n positions. Runs the model's own modules in the order
    of TransformerBlock.forward and CausalSelfAttention.forward (eval mode: no dropout)."""
    B, n = idx.shape
    P = past[0][0].size(2) if past else 0
    h = model.tok_emb(idx) + model.pos_emb(torch.arange(P, P + n))[None]
    cache = []

    def attend(a, x, kv):
        d = x.size(-1)
        H = a.heads
        hd = d // H
        q, k, v = (t.view(B, n, H, hd).transpose(1, 2) for t in a.qkv(x).split(d, dim=-1))
        if kv is not None:
            k, v = torch.cat([kv[0], k], dim=2), torch.cat([kv[1], v], dim=2)
        cache.append((k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)  # (B, H, n, P + n)
        if n > 1:  # new position i sees cached and new positions <= P + i
            att = att.masked_fill(~torch.ones(n, P + n, dtype=torch.bool).tril(P), float("-inf"))
        return a.proj((F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, n, d))

    for i, blk in enumerate(model.blocks):
        kv = past[i] if past else None
        if blk.pre_ln:
            h = h + attend(blk.attn, blk.ln_attn(h), kv)
            h = h + blk.ffn(blk.ln_ffn(h))
        else:
            h = blk.ln_attn(h + attend(blk.attn, h, kv))
            h = blk.ln_ffn(h + blk.ffn(h))
    return model.ln_f(h) @ model.tok_emb.weight.t(), cache


class KVCacheDecoder:
    """Transformer decoding with a KV cache. prefill(ids (1, c)) is shared by the rows."""
    impl = "torch-kvcache"

    def __init__(self, model, rows):
        self.model, self.rows, self.past = model, rows, None

    def prefill(self, ids):
        logits, past = kv_forward(self.model, ids)
        self.past = [(k.expand(self.rows, -1, -1, -1), v.expand(self.rows, -1, -1, -1)) for k, v in past]
        return logits[:, -1]

    def step(self, tok):
        logits, self.past = kv_forward(self.model, tok[:, None], self.past)
        return logits[:, -1]

    def state_bytes(self):
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.past)


class RecomputeDecoder:
    """Decoding without a cache: each step a full forward over the window (last max_len tokens)."""
    impl = "torch-recompute"

    def __init__(self, model, rows):
        self.model, self.rows, self.window = model, rows, None

    def prefill(self, ids):
        self.window = ids.expand(self.rows, -1)
        return self.model(ids)[:, -1]

    def step(self, tok):
        self.window = torch.cat([self.window, tok[:, None]], dim=1)[:, -self.model.cfg.Lmax:]
        return self.model(self.window)[:, -1]

    def state_bytes(self):
        return self.window.numel() * self.window.element_size()


def mean_time(f, min_s=0.3):
    """Mean seconds per call of f over at least min_s and at least 2 calls."""
    n, t0 = 0, time.perf_counter()
    while True:
        f()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= min_s and n >= 2:
            return dt / n


def check_kv_cache(cfg, n=20, tol=1e-4):
    """KV-cache logits (prefill half, then one token per step, 2 rows) == the full forward's."""
    model = build_model(dataclasses.replace(cfg, family="transformer")).eval()
    ids = torch.randint(0, cfg.V, (2, min(n, cfg.Lmax)))
    full = model(ids)
    n0 = ids.size(1) // 2
    got, past = kv_forward(model, ids[:, :n0])
    steps = [got]
    for t in range(n0, ids.size(1)):
        lg, past = kv_forward(model, ids[:, t:t + 1], past)
        steps.append(lg)
    err = (torch.cat(steps, dim=1) - full).abs().max().item() / full.abs().max().item()
    print(f"check: kv-cache logits {'match' if err <= tol else 'DIFFER FROM'} full forward (max rel err {err:.1e})")
    if err > tol:
        raise SystemExit(1)


def measure_ctx(dec, c, V):
    """One context: prefill c tokens; decode the S = min(32, c/2) positions ending at c."""
    S = min(32, c // 2)
    ids = torch.randint(0, V, (1, c))
    t_prefill = mean_time(lambda: dec.prefill(ids))
    tok = torch.randint(0, V, (dec.rows,))
    total, reps = 0.0, 0
    while total < 0.3 or reps < 2:  # each rep: prefill c - S untimed, then S timed steps
        dec.prefill(ids[:, :c - S])
        t0 = time.perf_counter()
        for _ in range(S):
            dec.step(tok)
        total += time.perf_counter() - t0
        reps += 1
    t_dec = total / (reps * S)
    return dict(ctx=c, prefill=c / t_prefill, dec_ms=1e3 * t_dec, dec_tok=dec.rows / t_dec,
                state_mb=dec.state_bytes() / 1048576.0, recompute=None)


def bench_family(cfg, rows, recompute_max):
    model = build_model(cfg).eval()
    dec = (KVCacheDecoder if cfg.family == "transformer" else RecomputeDecoder)(model, rows)
    ctxs, c = [], min(16, cfg.Lmax)
    while True:  # 16, 32, 64, ... and max_len itself
        ctxs.append(c)
        if c == cfg.Lmax:
            break
        c = min(2 * c, cfg.Lmax)
    g = []
    for c in ctxs:
        row = measure_ctx(dec, c, cfg.V)
        if c <= recompute_max:
            ids = torch.randint(0, cfg.V, (1, c))
            row["recompute"] = 1e3 * mean_time(lambda: model(ids))
        g.append(row)
    h = torch.rand(rows, cfg.d) - 0.5  # outside the blocks: the tied head and the token choice
    head_ms = 1e3 * mean_time(lambda: h @ model.tok_emb.weight.t(), 0.2)
    lg = h @ model.tok_emb.weight.t()
    pick_ms = 1e3 * mean_time(lambda: torch.multinomial(F.softmax(torch.topk(lg, 40).values, -1), 1), 0.2)

    print(f"generate: family={cfg.family} block={cfg.block} layers={cfg.n_layers} d={cfg.d} V={cfg.V} "
          f"max_len={cfg.Lmax} rows={rows} threads={torch.get_num_threads()} impl={dec.impl}")
    print("ctx\tprefill_tok_s\tdecode_ms_per_step\tdecode_tok_s\tstate_mb\trecompute_ms_per_token")
    for r in g:
        rc = "-" if r["recompute"] is None else f"{r['recompute']:.2f}"
        print(f"{r['ctx']}\t{r['prefill']:.0f}\t{r['dec_ms']:.3f}\t{r['dec_tok']:.1f}\t{r['state_mb']:.3f}\t{rc}")
    at = next((r for r in g if r["ctx"] == 128), g[0])  # the decode step at ctx 128, or the first
    print(f"head_ms_per_step: {head_ms:.3f} ({100.0 * head_ms / at['dec_ms']:.0f}% of a decode step at ctx {at['ctx']})")
    print(f"pick_ms_per_step: {pick_ms:.3f} (top-k 40 by torch.topk, {rows} rows)")
    print(f"decode_ms_ratio_last_over_first: {g[-1]['dec_ms'] / g[0]['dec_ms']:.3f} "
          f"(ctx {g[-1]['ctx']} / ctx {g[0]['ctx']})")


def generate(a, kv):
    """`--generate`: both families at the recipe's shape, the recipe's family first."""
    torch.set_num_threads(a.threads or int(kv.get("run.threads", 0) or 0) or 2)
    torch.manual_seed(int(kv.get("run.seed", 1) or 1))
    snli = kv.get("data.dataset") == "snli"
    max_len = int(kv.get("model.max_len", 0) or 0) or int(kv.get(
        "data.max_sentence_len" if snli else "data.seq_len", 48 if snli else 128))
    cfg = model_cfg(kv, max(max_len, a.seq_len))  # as gflow's, --seq-len raises max_len
    cfg.dropout = 0.0
    with torch.no_grad():
        check_kv_cache(cfg)
        bench_family(cfg, a.n, a.recompute_max)
        cfg.family = "transformer" if cfg.family == "grassmann" else "grassmann"
        print()
        bench_family(cfg, a.n, a.recompute_max)


def parse_args(argv=None):
    """The options, with the device's defaults resolved: a.modes (["eager"], ["compile"] or both),
    a.peak_n (2048 on the CPU, 8192 on a GPU), a.attn ("sdpa" or "manual" for --attn auto)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("recipe")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--peak-n", type=int, default=None, help="square matmul of the MFU (2048; 8192 on a GPU; 0: none)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the model trains (cpu)")
    ap.add_argument("--mode", choices=("eager", "compile", "both"), default=None,
                    help="eager, torch.compile, or both one after the other (eager; both with --device cuda)")
    ap.add_argument("--compile", action="store_true", help="same as --mode compile")
    ap.add_argument("--compile-mode", default="default", help="torch.compile's mode= (default)")
    ap.add_argument("--attn", choices=("auto", "sdpa", "manual"), default="auto",
                    help="Transformer attention: F.scaled_dot_product_attention or torch_ref's (auto: sdpa on a GPU)")
    ap.add_argument("--tf32", action="store_true", help="--device cuda: allow TF32 in matmuls (off: plain FP32)")
    ap.add_argument("--generate", action="store_true", help="generation speed (see above)")
    ap.add_argument("--n", type=int, default=1, help="--generate: rows decoded as one batch")
    ap.add_argument("--recompute-max", type=int, default=512,
                    help="--generate: largest ctx of the recompute_ms_per_token column")
    a = ap.parse_args(argv)
    if a.compile and a.mode not in (None, "compile"):
        ap.error(f"--compile contradicts --mode {a.mode}")
    mode = "compile" if a.compile else a.mode or ("both" if a.device == "cuda" else "eager")
    a.modes = ["eager", "compile"] if mode == "both" else [mode]
    if a.peak_n is None:
        a.peak_n = 8192 if a.device == "cuda" else 2048
    if a.attn == "auto":
        a.attn = "sdpa" if a.device == "cuda" and hasattr(F, "scaled_dot_product_attention") else "manual"
    if a.device == "cpu" and a.tf32:
        ap.error("--tf32 is for --device cuda")
    if a.generate and (a.device != "cpu" or a.mode or a.compile):
        ap.error("--generate runs eager on the CPU")
    if "compile" in a.modes and a.warmup < 1:
        ap.error("torch.compile compiles in the first step: --warmup must be >= 1")
    return a


def check_runtime(a):
    """What this torch cannot do for the options: a one-line SystemExit (status 1)."""
    if a.device == "cuda" and not torch.cuda.is_available():
        why = "built without CUDA" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no GPU visible"
        raise SystemExit(f"bench_torch: --device cuda: this torch ({torch.__version__}) cannot use a GPU ({why})")
    if "compile" in a.modes and not hasattr(torch, "compile"):
        raise SystemExit(f"bench_torch: torch.compile needs PyTorch 2.0 or later (this is {torch.__version__}); "
                         "use --mode eager")
    if a.attn == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        raise SystemExit(f"bench_torch: --attn sdpa needs F.scaled_dot_product_attention (PyTorch 2.0 or later; "
                         f"this is {torch.__version__})")


def train_bench(a, kv, cfg, B, L, mode, peak):
    """Time a.steps training steps after a.warmup untimed ones and print one block of fields."""
    dev = a.device
    cuda = dev != "cpu"
    model = build_model(cfg).to(dev)
    model.train()
    if a.attn == "sdpa":
        use_sdpa(model)
    opt = torch.optim.AdamW(model.parameters(), lr=float(kv.get("optim.lr", 1e-3)),
                            betas=(float(kv.get("optim.beta1", 0.9)), float(kv.get("optim.beta2", 0.999))),
                            weight_decay=float(kv.get("optim.weight_decay", 0.01)))
    clip = float(kv.get("optim.clip", 0) or 0) or 1.0  # as gflow bench: always pay for the norm

    # [run] precision = bf16 (--set run.precision=bf16, as gflow): PyTorch's own mixed precision,
    # autocast to bfloat16 around the forward and the loss (the backward follows it)
    bf16 = kv.get("run.precision", "fp32") == "bf16"

    def loss_of(win):
        if bf16:
            with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16):
                return model.loss(win)[0]
        return model.loss(win)[0]

    if mode == "compile":
        importlib.import_module("torch._dynamo").reset()  # nothing compiled before counts
        loss_of = torch.compile(loss_of, mode=a.compile_mode)
    clock = Clock(dev)
    tf = tb = to = 0.0
    loss = None
    w0 = time.perf_counter()
    first = warm = 0.0
    for it in range(a.warmup + a.steps):
        if it == a.warmup:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            warm = time.perf_counter() - w0
        win = torch.randint(0, cfg.V, (B, L + 1))
        t0 = clock.mark()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(win.to(dev) if cuda else win)
        t1 = clock.mark()
        loss.backward()
        t2 = clock.mark()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        t3 = clock.mark()
        f, b, o = clock.phases([t0, t1, t2, t3])
        if it == 0:
            first = time.perf_counter() - w0
        if it >= a.warmup:
            tf, tb, to = tf + f, tb + b, to + o
    n = a.steps
    per = (tf + tb + to) / n
    tok = B * L
    fpt = flops_per_token(cfg, L)
    gf = 3.0 * fpt * tok / per * 1e-9
    dp = 3 if cuda else 1  # a GPU step takes milliseconds
    attn = a.attn if cfg.family == "transformer" else ""
    if cuda:
        gpu = f" device=cuda mode={mode}{' attn=' + attn if attn else ''}{' tf32' if a.tf32 else ''}"
    else:  # the CPU's line as it always was, but for what the options change
        gpu = (" mode=compile" if mode == "compile" else "") + (" attn=sdpa" if attn == "sdpa" else "")
    print(f"bench_torch: {a.recipe} family={cfg.family} block={cfg.block} layers={cfg.n_layers} d={cfg.d} "
          f"V={cfg.V} L={L} B={B} threads={torch.get_num_threads()} torch={torch.__version__}{gpu}")
    if cuda:
        print(gpu_line(dev))
    if bf16:  # only then: an fp32 run prints the fields it always printed
        print("precision: bf16 (torch.autocast)")
    print(f"params: {n_params(model)}")
    print(f"steps: {n} (after {a.warmup} warmup)")
    print(f"loss_last: {loss.item():.4f}")
    print(f"tokens_per_s: {tok / per:.1f}")
    print(f"ms_per_step: {1e3 * per:.{dp}f}")
    print(f"ms_forward: {1e3 * tf / n:.{dp}f}")
    print(f"ms_backward: {1e3 * tb / n:.{dp}f}")
    print(f"ms_optimizer: {1e3 * to / n:.{dp}f}")
    if cuda or mode == "compile":
        print(f"warmup_s: {warm:.2f} (the {a.warmup} untimed steps; first step {first:.2f} s"
              f"{', compilation included' if mode == 'compile' else ''})")
    print(f"flops_per_token_fwd: {fpt:.4g}")
    print(f"flops_per_step_train: {3.0 * fpt * tok:.4g}")
    print(f"achieved_gflops: {gf:.1f}")
    if peak > 0:
        what = f"torch.matmul {'tf32' if a.tf32 else 'fp32'}" if cuda else "torch.matmul"
        print(f"sgemm_peak_gflops: {peak:.1f} ({a.peak_n}^3 {what})")
        print(f"mfu_pct: {100.0 * gf / peak:.1f}")
    if cuda:
        print(f"peak_device_mb: {torch.cuda.max_memory_allocated() / 1048576.0:.1f} "
              "(torch.cuda.max_memory_allocated over the timed steps)")
        print(f"device_reserved_mb: {torch.cuda.max_memory_reserved() / 1048576.0:.1f} "
              "(torch.cuda.max_memory_reserved, the caching allocator's pool)")
    print(f"peak_rss_mb: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.1f}")


def main(argv=None):
    a = parse_args(argv)
    check_runtime(a)
    kv = load_recipe(a.recipe, a.set)
    if a.generate:
        return generate(a, kv)
    L = a.seq_len or int(kv.get("data.seq_len", 128))
    B = a.batch or int(kv.get("train.batch_size", 32))
    T = a.threads or int(kv.get("run.threads", 0) or 0) or os.cpu_count()
    torch.set_num_threads(T)
    torch.manual_seed(int(kv.get("run.seed", 1) or 1))
    cfg = model_cfg(kv, L)
    if a.attn == "sdpa" and cfg.family == "transformer":
        check_sdpa(cfg, a.device)  # in FP32, before --tf32 allows TF32
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    peak = matmul_peak(a.peak_n, a.device) if a.peak_n > 0 else 0.0
    for i, mode in enumerate(a.modes):
        if i:
            print()
            gc.collect()  # the last mode's model, optimizer state and activations
            if a.device == "cuda":
                torch.cuda.empty_cache()
        train_bench(a, kv, cfg, B, L, mode, peak)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
