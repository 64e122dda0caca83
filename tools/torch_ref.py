#!/usr/bin/python3
"""Independent PyTorch reference for gflow's two model families (GrassmannLM, TransformerLM).

Written the way the public reproductions write it (plain nn.Module, readable, unoptimized), from
/work/shared/docs/grassmann-spec.md sections 1, 2, 6, 7, 8. It is the oracle for the golden
fixtures (tools/make_fixtures.py) and the PyTorch side of benchmarks, so it must not share code
or tricks with the C implementation. In particular the Grassmann mixer projects every offset's
Pluecker vector separately and averages afterwards (the C side averages first).

Usage:
  python3 tools/torch_ref.py --counts     print and assert the spec's parameter counts
  python3 tools/torch_ref.py --selftest   gradcheck, causality, average-first equivalence, counts
"""
import argparse
import math
import sys
import time
from dataclasses import dataclass, field, asdict
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    family: str = "grassmann"        # "grassmann" | "transformer"
    block: str = "post_ln"           # "post_ln" (paper / KN) | "pre_ln" (AX / GPT-2)
    V: int = 30522
    d: int = 256
    r: int = 32
    dff: int = 1024
    heads: int = 4
    n_layers: int = 6
    Lmax: int = 128
    dropout: float = 0.1
    offsets: List[int] = field(default_factory=lambda: [1, 2, 4, 8, 12, 16])   # mode A
    offset_schedule: List[int] = field(default_factory=list)  # mode B when non-empty
    normalize: bool = True
    gate: bool = True
    plucker: bool = True
    eps: float = 1e-8
    ln_eps: float = 1e-5    # every LayerNorm's epsilon ([model] ln_eps)

    def layer_offsets(self, layer):
        """Offsets used by `layer`: mode B (schedule) if given, else mode A (same list)."""
        if self.offset_schedule:
            assert len(self.offset_schedule) == self.n_layers, "schedule needs one offset per layer"
            return [self.offset_schedule[layer]]
        return list(self.offsets)


def pair_table(r):
    """Index pairs (i, j), i < j, in row-major upper-triangle order (0,1),(0,2),...,(r-2,r-1)."""
    ii, jj = [], []
    for i in range(r):
        for j in range(i + 1, r):
            ii.append(i)
            jj.append(j)
    return torch.tensor(ii, dtype=torch.long), torch.tensor(jj, dtype=torch.long)


def plucker(a, b, ii, jj):
    """p_k = a[i]*b[j] - a[j]*b[i] over the pair table; a is the current vector, b the past."""
    return a[..., ii] * b[..., jj] - a[..., jj] * b[..., ii]


# ----------------------------------------------------------------------------------------------
# Grassmann


class CausalGrassmannMixing(nn.Module):
    """z = w_red(n); g[t] = mean over valid offsets delta of w_plu(normalize(z[t] ^ z[t-delta]))."""

    def __init__(self, cfg, offsets):
        super().__init__()
        d, r = cfg.d, cfg.r
        npair = r * (r - 1) // 2
        self.offsets = list(offsets)
        self.normalize = cfg.normalize
        self.use_gate = cfg.gate
        self.use_plucker = cfg.plucker
        self.eps = cfg.eps
        self.w_red = nn.Linear(d, r)
        self.w_plu = nn.Linear(npair, d)
        if not cfg.plucker:
            # no-geometry stand-in: a learned map of the current z_t of the same width
            self.w_lin = nn.Linear(r, npair, bias=False)
        if cfg.gate:
            # first d input columns act on n, last d on g
            self.w_gate = nn.Linear(2 * d, d)
        ii, jj = pair_table(r)
        self.register_buffer("ii", ii, persistent=False)
        self.register_buffer("jj", jj, persistent=False)

    def geometry(self, n):
        """The mixed feature g, shape (B, L, d)."""
        B, L, d = n.shape
        z = self.w_red(n)  # (B, L, r)
        if not self.use_plucker:
            return self.w_plu(self.w_lin(z))
        acc = torch.zeros(B, L, d, dtype=n.dtype, device=n.device)
        count = torch.zeros(L, dtype=n.dtype, device=n.device)
        for delta in self.offsets:
            assert delta >= 1
            if delta >= L:
                continue  # no position has a past partner this far back
            cur = z[:, delta:, :]        # z[t],        t = delta..L-1
            past = z[:, :L - delta, :]   # z[t - delta]
            p = plucker(cur, past, self.ii, self.jj)
            if self.normalize:
                p = p / torch.clamp(p.norm(dim=-1, keepdim=True), min=self.eps)
            g_delta = self.w_plu(p)      # (B, L - delta, d), bias included
            acc = acc + F.pad(g_delta, (0, 0, delta, 0))  # place at positions delta..L-1
            count[delta:] += 1
        # positions with no valid offset keep acc = 0, hence g = 0
        return acc / torch.clamp(count, min=1).view(1, L, 1)

    def forward(self, n):
        g = self.geometry(n)
        if self.use_gate:
            alpha = torch.sigmoid(self.w_gate(torch.cat([n, g], dim=-1)))
        else:
            alpha = 0.5
        return alpha * n + (1 - alpha) * g


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d, cfg.dff)
        self.fc2 = nn.Linear(cfg.dff, cfg.d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))  # exact erf GELU


class GrassmannBlock(nn.Module):
    def __init__(self, cfg, offsets):
        super().__init__()
        self.pre_ln = cfg.block == "pre_ln"
        if self.pre_ln:
            self.ln_in = nn.LayerNorm(cfg.d, eps=cfg.ln_eps)
        self.mix = CausalGrassmannMixing(cfg, offsets)
        self.ln_mix = nn.LayerNorm(cfg.d, eps=cfg.ln_eps)
        self.ln_ffn = nn.LayerNorm(cfg.d, eps=cfg.ln_eps)
        self.ffn = FeedForward(cfg)
        self.drop_mix = nn.Dropout(cfg.dropout)
        self.drop_ffn = nn.Dropout(cfg.dropout)

    def forward(self, x):
        if self.pre_ln:
            n = self.ln_in(x)
            x = x + self.drop_mix(self.ln_mix(self.mix(n)))
            x = x + self.drop_ffn(self.ffn(self.ln_ffn(x)))
            return x
        # paper-literal post-LN: the alpha blend is the only path around the mixer
        y = self.drop_mix(self.ln_mix(self.mix(x)))
        return self.ln_ffn(y + self.drop_ffn(self.ffn(y)))


# ----------------------------------------------------------------------------------------------
# Transformer


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.d % cfg.heads == 0
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d)   # rows ordered [q; k; v]
        self.proj = nn.Linear(cfg.d, cfg.d)

    def forward(self, x):
        B, L, d = x.shape
        H = self.heads
        hd = d // H
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.view(B, L, H, hd).transpose(1, 2)  # (B, H, L, hd)
        k = k.view(B, L, H, hd).transpose(1, 2)
        v = v.view(B, L, H, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)  # (B, H, L, L)
        mask = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)  # no dropout on attention probabilities
        y = (att @ v).transpose(1, 2).contiguous().view(B, L, d)
        return self.proj(y)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre_ln = cfg.block == "pre_ln"
        self.ln_attn = nn.LayerNorm(cfg.d, eps=cfg.ln_eps)
        self.attn = CausalSelfAttention(cfg)
        self.ln_ffn = nn.LayerNorm(cfg.d, eps=cfg.ln_eps)
        self.ffn = FeedForward(cfg)
        self.drop_attn = nn.Dropout(cfg.dropout)
        self.drop_ffn = nn.Dropout(cfg.dropout)

    def forward(self, x):
        if self.pre_ln:  # GPT-2 / AX
            x = x + self.drop_attn(self.attn(self.ln_attn(x)))
            x = x + self.drop_ffn(self.ffn(self.ln_ffn(x)))
            return x
        # post-LN (KN)
        x = self.ln_attn(x + self.drop_attn(self.attn(x)))
        x = self.ln_ffn(x + self.drop_ffn(self.ffn(x)))
        return x


# ----------------------------------------------------------------------------------------------
# Language model shell shared by both families


class LanguageModel(nn.Module):
    def __init__(self, cfg, blocks):
        super().__init__()
        assert cfg.block in ("post_ln", "pre_ln")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.V, cfg.d)
        self.pos_emb = nn.Embedding(cfg.Lmax, cfg.d)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(cfg.d, eps=cfg.ln_eps)
        self.reset_parameters()

    def reset_parameters(self):
        """Training init (spec section 6 item 10): N(0, 0.02) weights, zero biases, LN (1, 0)."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        """idx (B, L) token ids -> logits (B, L, V)."""
        B, L = idx.shape
        assert L <= self.cfg.Lmax
        pos = torch.arange(L, device=idx.device)
        h = self.drop(self.tok_emb(idx) + self.pos_emb(pos)[None])
        for blk in self.blocks:
            h = blk(h)
        h = self.ln_f(h)
        return h @ self.tok_emb.weight.t()  # tied head, no bias

    def loss(self, window):
        """window (B, L+1): input window[:, :L], targets window[:, 1:]. Mean CE over B*L."""
        x, y = window[:, :-1], window[:, 1:]
        logits = self(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)), logits


class GrassmannLM(LanguageModel):
    def __init__(self, cfg):
        super().__init__(cfg, [GrassmannBlock(cfg, cfg.layer_offsets(l))
                               for l in range(cfg.n_layers)])


class TransformerLM(LanguageModel):
    def __init__(self, cfg):
        super().__init__(cfg, [TransformerBlock(cfg) for _ in range(cfg.n_layers)])


def build_model(cfg):
    if cfg.family == "grassmann":
        return GrassmannLM(cfg)
    if cfg.family == "transformer":
        return TransformerLM(cfg)
    raise ValueError(f"unknown family {cfg.family!r}")


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------------------------
# Checks

# (family, block, n_layers, Lmax) -> parameter count at V=30522, d=256, r=32, dff=1024 (spec 1.5, 7)
SPEC_COUNTS = {
    ("transformer", "post_ln", 6, 128): 12_585_472,
    ("grassmann", "post_ln", 6, 128): 12_607_168,
    ("grassmann", "pre_ln", 6, 128): 12_610_240,
    ("transformer", "post_ln", 12, 256): 17_356_800,
    ("grassmann", "post_ln", 12, 256): 17_400_192,
    ("grassmann", "pre_ln", 12, 256): 17_406_336,
}


def check_counts(verbose=True):
    ok = True
    for (fam, blk, nl, lmax), want in SPEC_COUNTS.items():
        blocks = [blk] if fam == "grassmann" else ["post_ln", "pre_ln"]  # T count is LN-order free
        for b in blocks:
            cfg = ModelConfig(family=fam, block=b, n_layers=nl, Lmax=lmax)
            got = n_params(build_model(cfg))
            good = got == want
            ok &= good
            if verbose:
                print(f"  {fam:11s} {b:7s} layers={nl:2d} Lmax={lmax:3d}: {got:>11,d} "
                      f"(spec {want:,d}) {'OK' if good else 'MISMATCH'}")
    assert ok, "parameter counts differ from the spec"
    return ok


def average_first_geometry(mix, n):
    """Alternative formula (what the C side does): mean of normalized Pluecker vectors over the
    valid offsets, projected once; g = 0 where no offset is valid."""
    B, L, d = n.shape
    z = mix.w_red(n)
    npair = mix.ii.numel()
    psum = torch.zeros(B, L, npair, dtype=n.dtype)
    count = torch.zeros(L, dtype=n.dtype)
    for t in range(L):
        for delta in mix.offsets:
            if t - delta < 0:
                continue
            p = plucker(z[:, t], z[:, t - delta], mix.ii, mix.jj)
            if mix.normalize:
                p = p / torch.clamp(p.norm(dim=-1, keepdim=True), min=mix.eps)
            psum[:, t] += p
            count[t] += 1
    g = mix.w_plu(psum / torch.clamp(count, min=1).view(1, L, 1))
    return torch.where(count.view(1, L, 1) > 0, g, torch.zeros_like(g))


def tiny_cfg(**kw):
    base = dict(V=7, d=8, r=4, dff=8, heads=2, n_layers=2, Lmax=6, dropout=0.0,
                offsets=[1, 2, 6], offset_schedule=[])
    base.update(kw)
    return ModelConfig(**base)


SELFTEST_VARIANTS = {
    "grassmann_post_A": dict(family="grassmann", block="post_ln"),
    "grassmann_pre_A": dict(family="grassmann", block="pre_ln"),
    "grassmann_post_B": dict(family="grassmann", block="post_ln", offset_schedule=[1, 3]),
    "grassmann_pre_B": dict(family="grassmann", block="pre_ln", offset_schedule=[1, 3]),
    "grassmann_post_A_nonorm": dict(family="grassmann", block="post_ln", normalize=False),
    "grassmann_post_A_nogate": dict(family="grassmann", block="post_ln", gate=False),
    "grassmann_post_A_noplucker": dict(family="grassmann", block="post_ln", plucker=False),
    "transformer_post": dict(family="transformer", block="post_ln"),
    "transformer_pre": dict(family="transformer", block="pre_ln"),
}


def randomize_(model, gen, std=0.3):
    """Generic non-trivial parameters (random biases and LN affine) for the checks."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            if ".ln" in name or name.startswith("ln_"):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise)
            else:
                p.copy_(std * noise)


def selftest():
    t0 = time.time()
    torch.set_num_threads(1)
    failures = []

    def report(name, ok, detail):
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {detail}")
        if not ok:
            failures.append(name)

    print("parameter counts:")
    try:
        check_counts()
        report("counts", True, "all 8 model/config counts equal the spec")
    except AssertionError as e:
        report("counts", False, str(e))

    print("gradcheck (float64, finite differences over every parameter of a tiny model):")
    for vname, kw in SELFTEST_VARIANTS.items():
        cfg = tiny_cfg(**kw)
        gen = torch.Generator().manual_seed(1234)
        model = build_model(cfg).double()
        randomize_(model, gen)
        window = torch.randint(0, cfg.V, (2, cfg.Lmax + 1), generator=gen)
        names = [n for n, _ in model.named_parameters()]
        params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

        def f(*ps):
            out = torch.nn.utils.stateless.functional_call(
                model, dict(zip(names, ps)), (window[:, :-1],))
            return F.cross_entropy(out.reshape(-1, cfg.V), window[:, 1:].reshape(-1))

        ok = torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-7, rtol=1e-5,
                                      raise_exception=False)
        report(f"gradcheck {vname}", ok, f"{sum(p.numel() for p in params)} parameters")

    print("causality (changing token t+1 leaves logits at positions <= t unchanged):")
    for vname, kw in SELFTEST_VARIANTS.items():
        cfg = tiny_cfg(**kw, Lmax=10, offsets=[1, 2, 4, 10])
        if "offset_schedule" in kw:
            cfg.offset_schedule = [1, 3]
        gen = torch.Generator().manual_seed(99)
        model = build_model(cfg)
        randomize_(model, gen)
        model.eval()
        L = cfg.Lmax
        x = torch.randint(0, cfg.V, (2, L), generator=gen)
        base = model(x)
        worst_past, min_future = 0.0, float("inf")
        for t in range(L - 1):
            x2 = x.clone()
            x2[:, t + 1] = (x2[:, t + 1] + 1 + t % (cfg.V - 1)) % cfg.V
            out = model(x2)
            worst_past = max(worst_past, (out[:, :t + 1] - base[:, :t + 1]).abs().max().item())
            min_future = min(min_future, (out[:, t + 1] - base[:, t + 1]).abs().max().item())
        ok = worst_past == 0.0 and min_future > 1e-4
        report(f"causal {vname}", ok,
               f"max |d logits[<=t]| = {worst_past:.1e}, min max |d logits[t+1]| = {min_future:.1e}")

    print("per-offset-then-average == average-first (g = 0 where no offset is valid):")
    for vname, kw in [("A offsets 1,2,4,12 (12 >= L skipped)", dict(offsets=[1, 2, 4, 12])),
                      ("A with duplicates 1,1,2,2,4,4", dict(offsets=[1, 1, 2, 2, 4, 4])),
                      ("B single offset 3", dict(offsets=[3])),
                      ("A nonorm", dict(offsets=[1, 2, 5], normalize=False))]:
        cfg = ModelConfig(d=16, r=6, dff=64, V=61, Lmax=12, n_layers=1, **kw)
        gen = torch.Generator().manual_seed(7)
        mix = CausalGrassmannMixing(cfg, cfg.offsets)
        randomize_(mix, gen)
        n = torch.randn(3, 12, 16, generator=gen)
        with torch.no_grad():
            g1 = mix.geometry(n)
            g2 = average_first_geometry(mix, n)
            mix64 = mix.double()
            e64 = (mix64.geometry(n.double()) - average_first_geometry(mix64, n.double()))
            e64 = e64.abs().max().item()
        # float32: relative to the largest |g| (unnormalized Pluecker vectors are large)
        rel = (g1 - g2).abs().max().item() / max(g1.abs().max().item(), 1.0)
        zero_ok = bool((g1[:, :min(cfg.offsets)] == 0).all())
        ok = rel <= 1e-6 and e64 <= 1e-12 and zero_ok
        report(f"avg-first {vname}", ok, f"fp32 max|diff|/max(|g|,1) = {rel:.2e}, "
               f"fp64 max|diff| = {e64:.1e}, g[t < min offset] == 0: {zero_ok}")

    print("pair order and sign (r=4: (0,1),(0,2),(0,3),(1,2),(1,3),(2,3), current first):")
    ii, jj = pair_table(4)
    a = torch.tensor([1.0, 2.0, 3.0, 5.0])
    b = torch.tensor([7.0, 11.0, 13.0, 17.0])
    want = torch.tensor([1 * 11 - 2 * 7, 1 * 13 - 3 * 7, 1 * 17 - 5 * 7,
                         2 * 13 - 3 * 11, 2 * 17 - 5 * 11, 3 * 17 - 5 * 13], dtype=torch.float32)
    got = plucker(a, b, ii, jj)
    report("pluecker order", torch.equal(got, want), f"{got.tolist()}")

    dt = time.time() - t0
    print(f"selftest: {'OK' if not failures else 'FAILED: ' + ', '.join(failures)} "
          f"({dt:.1f} s, torch {torch.__version__})")
    return not failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--counts", action="store_true", help="print and assert parameter counts")
    ap.add_argument("--selftest", action="store_true", help="run the reference's self-checks")
    args = ap.parse_args(argv)
    if not (args.counts or args.selftest):
        ap.print_help()
        return 0
    if args.counts:
        print(f"parameter counts (V=30522, d=256, r=32, dff=1024; torch {torch.__version__}):")
        check_counts()
        print("counts: OK")
    if args.selftest:
        return 0 if selftest() else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
