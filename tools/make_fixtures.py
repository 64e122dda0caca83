#!/usr/bin/python3
"""Generate the golden fixtures in tests/fixtures/golden/ from the PyTorch reference.

  /usr/bin/python3 tools/make_fixtures.py            # (re)write every fixture + README.md
  /usr/bin/python3 tools/make_fixtures.py --check    # regenerate in memory, compare with files

Deterministic: fixed seeds, float32, CPU, one thread. See tests/fixtures/golden/README.md.
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from torch_ref import ModelConfig, average_first_geometry, build_model, n_params  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "golden")

TINY = dict(V=61, d=16, r=6, dff=64, heads=4, n_layers=2, Lmax=12, dropout=0.0, eps=1e-8)
L = 12
B = 2
INIT_SEED = 1234
TOKENS_SEED = 4321
ADAMW = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, steps=6, clip=1.0)
# A variant whose parameters after the 6 AdamW steps are also stored (adamw.final.*), or None.
# Off by default: it adds ~34 KB and the size budget for all fixtures is ~600 KB.
FINAL_PARAMS_VARIANT = None

VARIANTS = {
    "grassmann_post_A": dict(family="grassmann", block="post_ln", offsets=[1, 2, 4, 12]),
    "grassmann_pre_A": dict(family="grassmann", block="pre_ln", offsets=[1, 2, 4, 12]),
    "grassmann_post_B": dict(family="grassmann", block="post_ln", offsets=[],
                             offset_schedule=[1, 3]),
    "grassmann_pre_B": dict(family="grassmann", block="pre_ln", offsets=[],
                            offset_schedule=[1, 3]),
    "transformer_post": dict(family="transformer", block="post_ln", offsets=[]),
    "transformer_pre": dict(family="transformer", block="pre_ln", offsets=[]),
    "grassmann_post_A_nonorm": dict(family="grassmann", block="post_ln", offsets=[1, 2, 4, 12],
                                    normalize=False),
    "grassmann_post_A_nogate": dict(family="grassmann", block="post_ln", offsets=[1, 2, 4, 12],
                                    gate=False),
    "grassmann_post_A_noplucker": dict(family="grassmann", block="post_ln",
                                       offsets=[1, 2, 4, 12], plucker=False),
}

# std of N(0, std) for weight matrices, by the parameter name's suffix; anything not listed
# (none at present) falls back to 0.02. Larger than training init so activations are O(1).
WEIGHT_STD = {
    "tok_emb.weight": 0.5,
    "pos_emb.weight": 0.1,
    "mix.w_red.weight": 0.3,
    "mix.w_plu.weight": 0.3,
    "mix.w_lin.weight": 0.3,
    "mix.w_gate.weight": 0.3,
    "attn.qkv.weight": 0.3,
    "attn.proj.weight": 0.1,
    "ffn.fc1.weight": 0.3,
    "ffn.fc2.weight": 0.1,
}
BIAS_STD = 0.02
LN_WEIGHT_STD = 0.1   # LN weight = 1 + N(0, 0.1)
LN_BIAS_STD = 0.05


def _is_layernorm(name):
    leaf = name.split(".")[-2]
    return leaf.startswith("ln_")


def fixture_init_(model, gen):
    """Deterministic, deliberately non-trivial parameters (in named_parameters order)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if _is_layernorm(name):
                if name.endswith(".weight"):
                    p.copy_(1.0 + LN_WEIGHT_STD * noise)
                else:
                    p.copy_(LN_BIAS_STD * noise)
            elif name.endswith(".bias"):
                p.copy_(BIAS_STD * noise)
            else:
                key = next((k for k in WEIGHT_STD if name == k or name.endswith("." + k)), None)
                p.copy_(WEIGHT_STD.get(key, 0.02) * noise)


def _fmt_list(xs):
    return ",".join(str(int(x)) for x in xs)


def _fmt_bool(b):
    return "true" if b else "false"


def metadata(vname, cfg):
    return {
        "fixture_format": "1",
        "variant": vname,
        "family": cfg.family,
        "block": cfg.block,
        "offset_mode": "B" if cfg.offset_schedule else ("A" if cfg.family == "grassmann" else ""),
        "offsets": _fmt_list(cfg.offsets),
        "offset_schedule": _fmt_list(cfg.offset_schedule),
        "normalize": _fmt_bool(cfg.normalize),
        "gate": _fmt_bool(cfg.gate),
        "plucker": _fmt_bool(cfg.plucker),
        "eps": repr(float(cfg.eps)),
        "ln_eps": "1e-05",
        "V": str(cfg.V), "d": str(cfg.d), "r": str(cfg.r), "dff": str(cfg.dff),
        "heads": str(cfg.heads), "n_layers": str(cfg.n_layers),
        "L": str(L), "Lmax": str(cfg.Lmax), "B": str(B),
        "dropout": repr(float(cfg.dropout)),
        "adamw_lr": repr(ADAMW["lr"]), "adamw_beta1": repr(ADAMW["beta1"]),
        "adamw_beta2": repr(ADAMW["beta2"]), "adamw_eps": repr(ADAMW["eps"]),
        "adamw_weight_decay": repr(ADAMW["weight_decay"]),
        "adamw_steps": str(ADAMW["steps"]), "clip_max_norm": repr(ADAMW["clip"]),
        "n_params": "",  # filled in below
        "init_seed": str(INIT_SEED), "tokens_seed": str(TOKENS_SEED),
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "generator": "tools/make_fixtures.py (reference: tools/torch_ref.py)",
    }


def _variant_setup(vname):
    """The variant's config, its model with the fixture parameters, and the batch."""
    kw = dict(TINY)
    kw.update(VARIANTS[vname])
    kw.setdefault("offset_schedule", [])
    cfg = ModelConfig(**kw)
    model = build_model(cfg)
    fixture_init_(model, torch.Generator().manual_seed(INIT_SEED))
    tokens = torch.randint(0, cfg.V, (B, L + 1), generator=torch.Generator().manual_seed(TOKENS_SEED))
    return cfg, model, tokens


def _adamw_steps(model, tokens, out):
    """6 AdamW steps on the same batch: zero_grad, backward, clip (pre-clip norm recorded), step;
    out["adamw.losses"], out["adamw.gnorm"]."""
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"],
                            betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"],
                            weight_decay=ADAMW["weight_decay"])
    losses, gnorms = [], []
    for _ in range(ADAMW["steps"]):
        opt.zero_grad(set_to_none=True)
        step_loss, _ = model.loss(tokens)
        step_loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=ADAMW["clip"])
        opt.step()
        losses.append(step_loss.item())
        gnorms.append(float(gn))
    out["adamw.losses"] = torch.tensor(losses, dtype=torch.float32)
    out["adamw.gnorm"] = torch.tensor(gnorms, dtype=torch.float32)


def make_variant(vname):
    cfg, model, tokens = _variant_setup(vname)

    out = {}
    for name, p in model.named_parameters():
        out[name] = p.detach().clone()
    out["input.tokens"] = tokens.to(torch.int32)

    # one forward/backward at the stored parameters
    model.train()  # dropout is 0, so train/eval are identical
    model.zero_grad(set_to_none=True)
    loss, logits = model.loss(tokens)
    loss.backward()
    out["out.logits"] = logits.detach().clone()
    out["out.loss"] = loss.detach().reshape(1).clone()
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()

    _adamw_steps(model, tokens, out)
    if vname == FINAL_PARAMS_VARIANT:
        for name, p in model.named_parameters():
            out["adamw.final." + name] = p.detach().clone()

    meta = metadata(vname, cfg)
    meta["n_params"] = str(n_params(model))
    for k, v in out.items():
        if v.dtype == torch.float32:
            assert torch.isfinite(v).all(), f"{vname}: {k} not finite"
    return out, meta, cfg


# [run] precision = bf16 (tests/nn/test_golden.c *_bf16): these variants again, in two bf16 forms.
BF16_VARIANTS = ("grassmann_post_A", "transformer_post")


def _bf16(x):
    """x rounded to bfloat16 (nearest even) and widened back: what gflow's bf16 products multiply."""
    return x.to(torch.bfloat16).to(torch.float32)


class _RoundedProduct(torch.autograd.Function):
    """y = x W^T with both inputs rounded to bf16 and fp32 accumulation, and the backward's two
    products likewise (dx = g W, dW = g^T x on rounded inputs): gflow's gf_gemm in bf16."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return _bf16(x) @ _bf16(w).t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g16 = _bf16(g)
        dx = g16 @ _bf16(w)
        dw = g16.reshape(-1, g.shape[-1]).t() @ _bf16(x).reshape(-1, x.shape[-1])
        return dx, dw


def _rounded_linear(x, w, b=None):
    y = _RoundedProduct.apply(x, w)
    return y if b is None else y + b


def _gflow_bf16_(model):
    """Make `model` compute as gflow does in bf16: every linear layer, the Pluecker projection and
    the tied head through _RoundedProduct; the Pluecker vectors averaged over the offsets before
    the projection (gflow's form: rounding the average is not averaging the rounded); attention's
    own products, norms, softmax and the loss in fp32. F.linear is patched by the caller."""
    for blk in model.blocks:
        mix = getattr(blk, "mix", None)
        if mix is not None and getattr(mix, "use_plucker", False):
            mix.geometry = (lambda m: (lambda n: average_first_geometry(m, n)))(mix)

    def forward(idx):
        B, L = idx.shape
        pos = torch.arange(L, device=idx.device)
        h = model.drop(model.tok_emb(idx) + model.pos_emb(pos)[None])
        for blk in model.blocks:
            h = blk(h)
        return _rounded_linear(model.ln_f(h), model.tok_emb.weight)

    model.forward = forward


def _run_bf16(model, tokens, out, prefix, autocast):
    """One forward/backward at the stored parameters into out[prefix + ...]."""
    model.zero_grad(set_to_none=True)
    if autocast:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss, logits = model.loss(tokens)
        loss, logits = loss.float(), logits.float()
    else:
        loss, logits = model.loss(tokens)
    loss.backward()
    out[prefix + "out.logits"] = logits.detach().clone()
    out[prefix + "out.loss"] = loss.detach().reshape(1).clone()
    for name, p in model.named_parameters():
        out[prefix + "grad." + name] = p.grad.detach().clone()


def make_bf16_variant(vname):
    """<vname>.bf16.safetensors: the fp32 fixture's parameters and batch; out.* / grad.* / adamw.*
    as gflow computes in bf16 (_gflow_bf16_), and autocast.out.* / autocast.grad.* as PyTorch's
    torch.autocast(cpu, bfloat16) does (its products return bf16: a looser comparison)."""
    cfg, model, tokens = _variant_setup(vname)
    out = {name: p.detach().clone() for name, p in model.named_parameters()}
    out["input.tokens"] = tokens.to(torch.int32)
    model.train()
    _run_bf16(model, tokens, out, "autocast.", autocast=True)
    linear = F.linear
    _gflow_bf16_(model)
    F.linear = _rounded_linear
    try:
        _run_bf16(model, tokens, out, "", autocast=False)
        _adamw_steps(model, tokens, out)
    finally:
        F.linear = linear
    meta = metadata(vname, cfg)
    meta["n_params"] = str(n_params(model))
    meta["precision"] = "bf16"
    meta["variant"] = vname + ".bf16"
    for k, v in out.items():
        if v.dtype == torch.float32:
            assert torch.isfinite(v).all(), f"{vname}.bf16: {k} not finite"
    return out, meta, cfg


README = """# Golden fixtures (generated; do not edit by hand)

Produced by `tools/make_fixtures.py` from the independent PyTorch reference `tools/torch_ref.py`
(plain nn.Module code written from docs/grassmann-spec.md sections 1, 2, 6, 7, 8; it does not share
code or tricks with the C implementation: the Grassmann mixer projects each offset's Pluecker
vector separately and averages afterwards, so these files check the C side's average-first form).

Generated with torch {torch_version}, numpy {numpy_version}, CPU, float32, 1 thread.

Regenerate (deterministic; rewrites every `*.safetensors` and this README):

    /usr/bin/python3 tools/make_fixtures.py
    /usr/bin/python3 tools/make_fixtures.py --check   # regenerate in memory, compare with files

Self-checks of the reference itself (gradcheck in float64, causality, average-first equivalence,
parameter counts): `/usr/bin/python3 tools/torch_ref.py --selftest`.

## File format

safetensors: an 8-byte little-endian u64 header length N, then N bytes of JSON (padded with
spaces to a multiple of 8), then raw little-endian data. Each JSON entry is
`name: {{"dtype": "F32"|"I32", "shape": [...], "data_offsets": [begin, end]}}`, offsets relative
to the start of the data section; tensors are laid out in sorted-name order without gaps.
`"__metadata__"` is a str->str map holding the config:

| key | meaning |
|---|---|
| family, block | `grassmann`/`transformer`, `post_ln`/`pre_ln` |
| offset_mode | `A` (same `offsets` in every layer), `B` (`offset_schedule[l]` for layer l), empty for transformer |
| offsets, offset_schedule | comma-separated ints (empty when unused) |
| normalize, gate, plucker | `true`/`false` |
| eps | Pluecker norm floor, p / max(norm(p), eps) |
| ln_eps | LayerNorm eps (1e-05 everywhere) |
| V, d, r, dff, heads, n_layers, L, Lmax, B, dropout | model/batch sizes (dropout is 0) |
| adamw_lr, adamw_beta1, adamw_beta2, adamw_eps, adamw_weight_decay, adamw_steps, clip_max_norm | training-step check |
| n_params, init_seed, tokens_seed, torch_version, numpy_version, variant, fixture_format | bookkeeping |

Floats are written with Python `repr` (e.g. `1e-08`, `0.01`), parseable by strtod.

## Tensors in every file

| name | dtype, shape | content |
|---|---|---|
| `<param name>` | F32, PyTorch shape | every parameter, exact gflow names, Linear weights [out, in] |
| `input.tokens` | I32, (B, L+1) | one batch of windows; input = [:, :L], targets = [:, 1:L+1] |
| `out.logits` | F32, (B, L, V) | logits at the stored parameters |
| `out.loss` | F32, (1,) | mean cross-entropy over all B*L positions |
| `grad.<param name>` | F32 | d loss / d param at the stored parameters (no clipping) |
| `adamw.losses` | F32, (6,) | loss before each of 6 training steps on the same batch |
| `adamw.gnorm` | F32, (6,) | pre-clip global grad L2 norm of each step |

{final_note}One training step is: zero_grad; loss.backward(); clip_grad_norm_(max_norm=1.0) over all
parameters; torch.optim.AdamW(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1) on all
parameters (decoupled decay, p -= lr*wd*p before the Adam update, bias-corrected moments).

Parameter names: `tok_emb.weight`, `pos_emb.weight`, `ln_f.{{weight,bias}}`; Grassmann block i:
`blocks.i.ln_in.*` (pre_ln only), `blocks.i.mix.w_red.*` (r, d), `blocks.i.mix.w_plu.*`
(d, r(r-1)/2), `blocks.i.mix.w_gate.*` (d, 2d; absent when gate=false; first d input columns act on
n, last d on g), `blocks.i.mix.w_lin.weight` (r(r-1)/2, r; only when plucker=false),
`blocks.i.ln_mix.*`, `blocks.i.ln_ffn.*`, `blocks.i.ffn.fc1.*` (dff, d), `blocks.i.ffn.fc2.*`
(d, dff). Transformer block i: `blocks.i.ln_attn.*`, `blocks.i.attn.qkv.*` (3d, d; rows [q; k; v];
head h uses rows h*d/H..(h+1)*d/H-1 within each of the q, k, v blocks), `blocks.i.attn.proj.*`,
`blocks.i.ln_ffn.*`, `blocks.i.ffn.*`.

## Shared tiny config

V=61, d=16, r=6 (15 Pluecker coordinates), dff=64, heads=4, n_layers=2, L=Lmax=12, B=2,
dropout 0, eps 1e-8, LayerNorm eps 1e-5, exact-erf GELU, tied head, final LayerNorm.
All variants use the same `input.tokens` (seed {tokens_seed}).

Parameters (seed {init_seed}, drawn in named_parameters order, N(0, std)): tok_emb 0.5, pos_emb 0.1,
w_red / w_plu / w_lin / w_gate / qkv / fc1 0.3, proj / fc2 0.1; every bias N(0, 0.02); LayerNorm
weight 1 + N(0, 0.1), bias N(0, 0.05). Larger than the training init (N(0, 0.02), zero biases,
LN (1, 0)) so activations are O(1), the Pluecker norms sit far from eps, and the bias/LN gradients
are exercised.

## Variants

| file | family | block | offsets | options | params | size |
|---|---|---|---|---|---|---|
{variant_rows}

Notes:
- `_A` files use offsets 1,2,4,12 in both layers; 12 >= L exercises the skip, and position 0 (no
  valid offset) must get g = 0 (not b_plu).
- `_B` files use offset_schedule 1,3: layer 0 uses only offset 1, layer 1 only offset 3
  (positions 0..2 of layer 1 get g = 0).
- `nonorm`: p is used unnormalized. `nogate`: m = 0.5 n + 0.5 g, and there is no w_gate.
  `noplucker`: g = w_plu(w_lin(z_t)) at every position (no pairing, no offset averaging, no zero
  rule, no normalization).

## Suggested tolerances for the C comparison (float32)

A float64 numpy re-implementation (average-first form) reproduces `out.logits` to 3.5e-6 and
`out.loss` to 1.2e-6, so float32 noise is a few 1e-6. Suggested: logits 3e-5 absolute; loss 1e-5;
grads 1e-4 relative to the tensor's max |value|; adamw.losses and adamw.gnorm 1e-4 relative.
Step k's loss is computed after k updates, so losses 1..5 check clipping, AdamW moments, bias
correction and the decoupled decay.

## bf16 fixtures (`*.bf16.safetensors`)

For `[run] precision = bf16` (tests/nn/test_golden.c `*_bf16`, also on the GPU in suite cuda):
the variant's parameters and batch as above, with `out.*`, `grad.*` and `adamw.*` computed by the
reference made to compute as gflow does in bf16 (every linear layer, the Pluecker projection and
the tied head with both inputs rounded to bfloat16, nearest even, and fp32 accumulation, in the
backward's two products too; the Pluecker vectors averaged before the projection; attention's own
products, norms, softmax and the loss in fp32), and `autocast.out.logits`, `autocast.out.loss`,
`autocast.grad.*` from the unmodified reference under `torch.autocast("cpu", torch.bfloat16)`
(its products return bf16, so that comparison is looser). Metadata `precision = bf16`. The
tolerances are test_golden.c's `bf16_exact` and `bf16_autocast`, with what was measured.

## Checksums (sha256)

{checksums}
"""


def _variant_row(vname, meta, size):
    off = meta["offsets"] if meta["offset_mode"] == "A" else (
        "sched " + meta["offset_schedule"] if meta["offset_mode"] == "B" else "-")
    opts = []
    if meta["family"] == "grassmann":
        for k in ("normalize", "gate", "plucker"):
            if meta[k] == "false":
                opts.append(k + "=false")
    return (f"| {vname}.safetensors | {meta['family']} | {meta['block']} | {off} | "
            f"{', '.join(opts) or '-'} | {meta['n_params']} | {size} B |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="do not write; regenerate and compare with the files on disk")
    ap.add_argument("--out", default=OUT_DIR, help="output directory")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)

    rows, sums, total, bad = [], [], 0, 0
    jobs = [(v, make_variant) for v in VARIANTS] + [(v + ".bf16", make_bf16_variant) for v in BF16_VARIANTS]
    for fname, make in jobs:
        tensors, meta, cfg = make(fname[:-5] if fname.endswith(".bf16") else fname)
        verdict, detail, blob = safetensors_io.emit_fixture(
            os.path.join(args.out, fname + ".safetensors"), tensors, meta, args.check)
        bad += verdict == "DIFFERS"
        size = len(blob)
        total += size
        digest = hashlib.sha256(blob).hexdigest()
        print(f"  {verdict:7s} {fname}.safetensors  {detail}".rstrip())
        rows.append(_variant_row(fname, meta, size))
        sums.append(f"    {digest}  {fname}.safetensors")
        print(f"{fname:28s} {size:7d} B  loss {tensors['out.loss'].item():.6f}  "
              f"adamw.losses {[round(x, 4) for x in tensors['adamw.losses'].tolist()]}")
    print(f"total {total} B ({total / 1024:.1f} KiB)")

    final_note = "" if FINAL_PARAMS_VARIANT is None else (
        f"`{FINAL_PARAMS_VARIANT}.safetensors` additionally holds `adamw.final.<param name>`: "
        "every parameter after the 6 steps.\n")
    if not args.check:
        text = README.format(torch_version=torch.__version__, numpy_version=np.__version__,
                             final_note=final_note, tokens_seed=TOKENS_SEED,
                             init_seed=INIT_SEED, variant_rows="\n".join(rows),
                             checksums="\n".join(sums))
        with open(os.path.join(args.out, "README.md"), "w") as f:
            f.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
