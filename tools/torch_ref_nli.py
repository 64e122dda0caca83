#!/usr/bin/python3
"""Independent PyTorch reference for gflow's SNLI classifiers (include/gflow/nli.h).

Plain nn.Module code, written from the reading documented in include/gflow/nli.h (the issue's
token-sequence spec of the paper's GrassmannPluckerNLIModel and a size-matched Transformer head).
It shares no code or tricks with the C side: the windowed Grassmann mixer builds the partner
table window by window, forms every (t, s) Pluecker vector, projects each pair per mixing head
and averages afterwards (the C op averages first and projects once); attention is written out
with an explicit key-padding mask.

Usage:
  python3 tools/torch_ref_nli.py --counts     print the parameter counts at the recipe scale
  python3 tools/torch_ref_nli.py --selftest   float64 gradcheck of both heads, padding invariance
"""
import argparse
import math
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True


@dataclass
class NLIConfig:
    family: str = "grassmann"   # "grassmann" | "transformer"
    V: int = 30522
    d: int = 256
    dff: int = 512
    n_layers: int = 2
    Lmax: int = 48              # Ls
    r: int = 64                 # d_proj: C(64, 2) = 2016 Pluecker coordinates
    window: int = 8
    stride: int = 8
    mix_heads: int = 4
    heads: int = 4
    classifier_hidden: int = 256
    dropout: float = 0.1
    eps: float = 1e-8
    normalize: bool = True


def pair_table(r):
    ii, jj = [], []
    for i in range(r):
        for j in range(i + 1, r):
            ii.append(i)
            jj.append(j)
    return torch.tensor(ii, dtype=torch.long), torch.tensor(jj, dtype=torch.long)


def shares_window(L, window, stride):
    """(L, L) bool: positions t and s lie in at least one common window."""
    share = torch.zeros(L, L, dtype=torch.bool)
    k = 0
    while k * stride < L:
        lo, hi = k * stride, min(k * stride + window, L)
        share[lo:hi, lo:hi] = True
        k += 1
    return share


class WindowGrassmannMixing(nn.Module):
    """g_t = mean over partners s of [W_h p̂_h(z_t, z_s) + b_h]_h; 0 for padding / no partner."""

    def __init__(self, cfg):
        super().__init__()
        d, r, H = cfg.d, cfg.r, cfg.mix_heads
        npair = r * (r - 1) // 2
        assert npair % H == 0 and d % H == 0
        self.H, self.Ph, self.Dh = H, npair // H, d // H
        self.window, self.stride, self.eps, self.normalize = cfg.window, cfg.stride, cfg.eps, cfg.normalize
        self.w_red = nn.Linear(d, r)
        # head h: rows h*Dh..(h+1)*Dh-1 act on coordinates h*Ph..(h+1)*Ph-1 (stored (d, Ph))
        self.w_plu = nn.Linear(self.Ph, d)
        self.w_gate = nn.Linear(2 * d, d)
        ii, jj = pair_table(r)
        self.register_buffer("ii", ii, persistent=False)
        self.register_buffer("jj", jj, persistent=False)

    def geometry(self, n, mask):
        B, L, d = n.shape
        z = self.w_red(n)                                    # (B, L, r)
        a = z[:, :, None, :]                                 # current t
        c = z[:, None, :, :]                                 # partner s
        p = a[..., self.ii] * c[..., self.jj] - a[..., self.jj] * c[..., self.ii]  # (B, L, L, P)
        if self.normalize:
            p = p / torch.clamp(p.norm(dim=-1, keepdim=True), min=self.eps)
        ph = p.reshape(B, L, L, self.H, self.Ph)
        W = self.w_plu.weight.reshape(self.H, self.Dh, self.Ph)
        g_pair = torch.einsum("btshk,hdk->btshd", ph, W).reshape(B, L, L, d) + self.w_plu.bias
        m = mask > 0
        partner = (shares_window(L, self.window, self.stride).to(n.device)[None]
                   & ~torch.eye(L, dtype=torch.bool, device=n.device)[None]
                   & m[:, :, None] & m[:, None, :])          # (B, L, L)
        w = partner.to(n.dtype)
        cnt = w.sum(-1, keepdim=True)                        # (B, L, 1)
        g = (g_pair * w[..., None]).sum(2) / torch.clamp(cnt, min=1)
        return torch.where(cnt > 0, g, torch.zeros_like(g))

    def forward(self, n, mask):
        g = self.geometry(n, mask)
        alpha = torch.sigmoid(self.w_gate(torch.cat([n, g], dim=-1)))
        return alpha * n + (1 - alpha) * g


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d, cfg.dff)
        self.fc2 = nn.Linear(cfg.dff, cfg.d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class GrassmannBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_in = nn.LayerNorm(cfg.d, eps=1e-5)
        self.mix = WindowGrassmannMixing(cfg)
        self.ln_mix = nn.LayerNorm(cfg.d, eps=1e-5)
        self.ln_ffn = nn.LayerNorm(cfg.d, eps=1e-5)
        self.ffn = FeedForward(cfg)
        self.drop1 = nn.Dropout(cfg.dropout)
        self.drop2 = nn.Dropout(cfg.dropout)

    def forward(self, x, mask):
        x = x + self.drop1(self.ln_mix(self.mix(self.ln_in(x), mask)))
        return x + self.drop2(self.ffn(self.ln_ffn(x)))


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d)
        self.proj = nn.Linear(cfg.d, cfg.d)

    def forward(self, x, mask):
        B, L, d = x.shape
        H, hd = self.heads, d // self.heads
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, L, H, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)          # (B, H, L, L)
        keep = (mask > 0)[:, None, None, :]                       # padding keys never attended
        att = att.masked_fill(~keep, -1e30)
        prob = torch.where(keep.any(-1, keepdim=True), F.softmax(att, dim=-1), torch.zeros_like(att))
        y = (prob @ v).transpose(1, 2).contiguous().view(B, L, d)
        return self.proj(y)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.d, eps=1e-5)
        self.attn = SelfAttention(cfg)
        self.ln_ffn = nn.LayerNorm(cfg.d, eps=1e-5)
        self.ffn = FeedForward(cfg)
        self.drop1 = nn.Dropout(cfg.dropout)
        self.drop2 = nn.Dropout(cfg.dropout)

    def forward(self, x, mask):
        x = x + self.drop1(self.attn(self.ln_attn(x), mask))
        return x + self.drop2(self.ffn(self.ln_ffn(x)))


class Classifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(4 * cfg.d, cfg.classifier_hidden)
        self.fc2 = nn.Linear(cfg.classifier_hidden, 3)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, f):
        return self.fc2(self.drop(F.gelu(self.fc1(f))))


class NLIModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.V, cfg.d)
        self.pos_emb = nn.Embedding(cfg.Lmax, cfg.d)
        self.drop = nn.Dropout(cfg.dropout)
        blk = GrassmannBlock if cfg.family == "grassmann" else TransformerBlock
        self.blocks = nn.ModuleList([blk(cfg) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d, eps=1e-5)
        self.cls = Classifier(cfg)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def encode(self, ids, mask):
        """ids (B, Ls), mask (B, Ls) float -> masked mean of LN_f(h) over real tokens (B, d)."""
        B, L = ids.shape
        h = self.drop(self.tok_emb(ids) + self.pos_emb(torch.arange(L, device=ids.device))[None])
        for blk in self.blocks:
            h = blk(h, mask)
        h = self.ln_f(h)
        return (h * mask[..., None]).sum(1) / torch.clamp(mask.sum(1, keepdim=True), min=1.0)

    def forward(self, prem, prem_mask, hyp, hyp_mask):
        u = self.encode(prem, prem_mask)
        v = self.encode(hyp, hyp_mask)
        return self.cls(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))

    def loss(self, prem, prem_mask, hyp, hyp_mask, labels):
        logits = self(prem, prem_mask, hyp, hyp_mask)
        return F.cross_entropy(logits, labels.long(), ignore_index=-1), logits


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def counts():
    rows = []
    for V in (8192, 30522):
        g = n_params(NLIModel(NLIConfig(family="grassmann", V=V)))
        t = n_params(NLIModel(NLIConfig(family="transformer", V=V)))
        rows.append((V, g, t))
        print(f"  V={V:6d}: grassmann {g:>11,d}  transformer {t:>11,d}  ratio {g / t:.4f}")
    return rows


def selftest():
    torch.manual_seed(0)
    ok = True
    for fam in ("grassmann", "transformer"):
        cfg = NLIConfig(family=fam, V=11, d=8, dff=8, r=4, mix_heads=2, heads=2, Lmax=7, window=3,
                        stride=2, classifier_hidden=5, dropout=0.0)
        model = NLIModel(cfg).double()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
        B, L = 3, 7
        prem = torch.randint(0, cfg.V, (B, L))
        hyp = torch.randint(0, cfg.V, (B, L))
        pm = torch.tensor([[1.0] * 7, [1.0] * 4 + [0.0] * 3, [0.0] * 7], dtype=torch.float64)
        hm = torch.tensor([[1.0] * 5 + [0.0] * 2, [1.0] * 7, [0.0] * 7], dtype=torch.float64)
        labels = torch.tensor([0, 2, -1])
        names = [n for n, _ in model.named_parameters()]
        params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

        def f(*ps):
            out = torch.func.functional_call(model, dict(zip(names, ps)), (prem, pm, hyp, hm)) \
                if hasattr(torch, "func") else \
                torch.nn.utils.stateless.functional_call(model, dict(zip(names, ps)), (prem, pm, hyp, hm))
            return F.cross_entropy(out, labels, ignore_index=-1)

        g_ok = torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
        # padding invariance: changing padded ids changes nothing
        with torch.no_grad():
            base = model(prem, pm, hyp, hm)
            prem2 = prem.clone()
            prem2[1, 4:] = (prem2[1, 4:] + 1) % cfg.V
            prem2[2] = (prem2[2] + 3) % cfg.V
            pad_ok = torch.equal(base, model(prem2, pm, hyp, hm))
        print(f"  [{'PASS' if g_ok and pad_ok else 'FAIL'}] {fam}: gradcheck {g_ok}, padding invariance {pad_ok}")
        ok &= g_ok and pad_ok
    print("parameter counts at the recipe scale (d=256, r=64, dff=512, 2 layers, Ls=48):")
    for V, g, t in counts():
        good = abs(g / t - 1) < 0.03
        ok &= good
    print(f"selftest: {'OK' if ok else 'FAILED'} (torch {torch.__version__})")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--counts", action="store_true")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args(argv)
    if args.counts:
        counts()
    if args.selftest:
        return 0 if selftest() else 1
    if not (args.counts or args.selftest):
        ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
