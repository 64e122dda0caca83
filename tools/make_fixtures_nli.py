#!/usr/bin/python3
"""Generate the NLI golden fixtures tests/fixtures/golden/nli_*.safetensors from the PyTorch
reference tools/torch_ref_nli.py, and (re)write the NLI section of tests/fixtures/golden/README.md
(between the markers below; the rest of the README belongs to tools/make_fixtures.py, which
rewrites it whole: run this script after that one).

  /usr/bin/python3 tools/make_fixtures_nli.py            # (re)write the nli_* fixtures + README section
  /usr/bin/python3 tools/make_fixtures_nli.py --check    # regenerate in memory, compare with files

Deterministic: fixed seeds, float32, CPU, one thread.
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from torch_ref_nli import NLIConfig, NLIModel, n_params  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "golden")
BEGIN, END = "<!-- nli fixtures: begin (tools/make_fixtures_nli.py) -->", "<!-- nli fixtures: end -->"

TINY = dict(V=37, d=16, dff=32, n_layers=2, Lmax=10, r=8, mix_heads=4, heads=4, classifier_hidden=12,
            dropout=0.0, eps=1e-8)
B, LS = 4, 10
PREM_LEN = [10, 7, 1, 0]   # row 2: a lone token (no partner, g = 0); row 3: unused (label -1)
HYP_LEN = [5, 9, 3, 0]
LABELS = [0, 2, 1, -1]
INIT_SEED, TOKENS_SEED = 1234, 4321
ADAMW = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, steps=6, clip=1.0)

VARIANTS = {
    "nli_grassmann": dict(family="grassmann", window=4, stride=4),
    "nli_grassmann_overlap": dict(family="grassmann", window=5, stride=3),
    "nli_transformer": dict(family="transformer"),
}

WEIGHT_STD = {"tok_emb.weight": 0.5, "pos_emb.weight": 0.1, "mix.w_red.weight": 0.3, "mix.w_plu.weight": 0.3,
              "mix.w_gate.weight": 0.3, "attn.qkv.weight": 0.3, "attn.proj.weight": 0.1, "ffn.fc1.weight": 0.3,
              "ffn.fc2.weight": 0.1, "cls.fc1.weight": 0.2, "cls.fc2.weight": 0.3}


def fixture_init_(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.split(".")[-2].startswith("ln_"):
                p.copy_((1.0 + 0.1 * noise) if name.endswith(".weight") else 0.05 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.02 * noise)
            else:
                key = next((k for k in WEIGHT_STD if name == k or name.endswith("." + k)), None)
                p.copy_(WEIGHT_STD.get(key, 0.02) * noise)


def batch(V):
    gen = torch.Generator().manual_seed(TOKENS_SEED)
    prem = torch.randint(1, V, (B, LS), generator=gen)
    hyp = torch.randint(1, V, (B, LS), generator=gen)
    pm = torch.zeros(B, LS)
    hm = torch.zeros(B, LS)
    for b in range(B):
        pm[b, :PREM_LEN[b]] = 1
        hm[b, :HYP_LEN[b]] = 1
    prem = torch.where(pm > 0, prem, torch.zeros_like(prem))   # pad id 0
    hyp = torch.where(hm > 0, hyp, torch.zeros_like(hyp))
    return prem, pm, hyp, hm, torch.tensor(LABELS)


def make_variant(vname):
    kw = dict(TINY)
    kw.update(VARIANTS[vname])
    cfg = NLIConfig(**kw)
    model = NLIModel(cfg)
    fixture_init_(model, torch.Generator().manual_seed(INIT_SEED))
    prem, pm, hyp, hm, labels = batch(cfg.V)
    out = {name: p.detach().clone() for name, p in model.named_parameters()}
    out.update({"input.prem": prem.to(torch.int32), "input.hyp": hyp.to(torch.int32),
                "input.prem_mask": pm, "input.hyp_mask": hm, "input.labels": labels.to(torch.int32)})
    model.train()
    model.zero_grad(set_to_none=True)
    loss, logits = model.loss(prem, pm, hyp, hm, labels)
    loss.backward()
    out["out.logits"] = logits.detach().clone()
    out["out.loss"] = loss.detach().reshape(1).clone()
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    losses, gnorms = [], []
    for _ in range(ADAMW["steps"]):
        opt.zero_grad(set_to_none=True)
        l, _ = model.loss(prem, pm, hyp, hm, labels)
        l.backward()
        gnorms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=ADAMW["clip"])))
        opt.step()
        losses.append(l.item())
    out["adamw.losses"] = torch.tensor(losses, dtype=torch.float32)
    out["adamw.gnorm"] = torch.tensor(gnorms, dtype=torch.float32)
    meta = {"fixture_format": "1", "variant": vname, "family": cfg.family, "V": str(cfg.V), "d": str(cfg.d),
            "dff": str(cfg.dff), "n_layers": str(cfg.n_layers), "Lmax": str(cfg.Lmax), "Ls": str(LS), "B": str(B),
            "r": str(cfg.r), "window": str(cfg.window), "stride": str(cfg.stride), "mix_heads": str(cfg.mix_heads),
            "heads": str(cfg.heads), "classifier_hidden": str(cfg.classifier_hidden), "eps": repr(float(cfg.eps)),
            "ln_eps": "1e-05", "normalize": "true" if cfg.normalize else "false", "dropout": "0.0",
            "adamw_lr": repr(ADAMW["lr"]), "adamw_beta1": repr(ADAMW["beta1"]), "adamw_beta2": repr(ADAMW["beta2"]),
            "adamw_eps": repr(ADAMW["eps"]), "adamw_weight_decay": repr(ADAMW["weight_decay"]),
            "adamw_steps": str(ADAMW["steps"]), "clip_max_norm": repr(ADAMW["clip"]),
            "n_params": str(n_params(model)), "init_seed": str(INIT_SEED), "tokens_seed": str(TOKENS_SEED),
            "torch_version": torch.__version__, "numpy_version": np.__version__,
            "generator": "tools/make_fixtures_nli.py (reference: tools/torch_ref_nli.py)"}
    for k, v in out.items():
        if v.dtype == torch.float32:
            assert torch.isfinite(v).all(), f"{vname}: {k} not finite"
    return out, meta


SECTION = """{begin}
## NLI fixtures (`nli_*.safetensors`)

Produced by `tools/make_fixtures_nli.py` from `tools/torch_ref_nli.py` (independent of the C code:
the windowed mixer projects every (t, s) pair per mixing head and averages afterwards; attention is
written out with an explicit key-padding mask). Checked by `tests/nn/test_nli.c` with the tolerances
of `test_golden.c`. Regenerate with `/usr/bin/python3 tools/make_fixtures_nli.py` (after
`tools/make_fixtures.py`, which rewrites this README whole); `--check` compares without writing.
torch {torch_version}, numpy {numpy_version}, CPU, float32, 1 thread.

Tiny config: V=37, d=16, dff=32, 2 layers, Ls=Lmax=10, r=8 (28 Pluecker coordinates), mix_heads=4
(7 coordinates -> 4 outputs each), heads=4, classifier_hidden=12, dropout 0, eps 1e-8, pre-LN blocks.
One batch of B=4 pairs (seed {tokens_seed}), pad id 0: premise lengths 10, 7, 1, 0 and hypothesis
lengths 5, 9, 3, 0; labels 0, 2, 1, -1 (row 3 is an unused row: zero masks, ignored by the loss).
Parameters (seed {init_seed}): as the LM fixtures, plus cls.fc1 N(0, 0.2), cls.fc2 N(0, 0.3).

| tensor | dtype, shape | content |
|---|---|---|
| `<param name>` | F32 | every parameter (gflow names, see include/gflow/nli.h) |
| `input.prem`, `input.hyp` | I32, (B, Ls) | token ids |
| `input.prem_mask`, `input.hyp_mask` | F32, (B, Ls) | 1 = token, 0 = padding |
| `input.labels` | I32, (B) | 0 entailment, 1 neutral, 2 contradiction, -1 ignored |
| `out.logits`, `out.loss` | F32, (B, 3), (1) | logits; mean CE over rows with label >= 0 |
| `grad.<param name>` | F32 | d loss / d param |
| `adamw.losses`, `adamw.gnorm` | F32, (6) | 6 AdamW steps as the LM fixtures (clip 1.0, lr 1e-2, wd 0.1 on all) |

Metadata keys: family, V, d, dff, n_layers, Lmax, Ls, B, r, window, stride, mix_heads, heads,
classifier_hidden, eps, ln_eps, normalize, dropout, adamw_*, clip_max_norm, n_params, seeds, versions.

| file | family | window / stride | params | size |
|---|---|---|---|---|
{rows}

`nli_grassmann` has windows [0,4) [4,8) [8,10); `nli_grassmann_overlap` (window 5, stride 3) has
windows [0,5) [3,8) [6,10) [9,10), so partners span two windows.

Checksums (sha256):

{checksums}
{end}
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rows, sums, bad = [], [], 0
    for vname in VARIANTS:
        tensors, meta = make_variant(vname)
        verdict, detail, blob = safetensors_io.emit_fixture(
            os.path.join(OUT_DIR, vname + ".safetensors"), tensors, meta, args.check)
        bad += verdict == "DIFFERS"
        print(f"  {verdict:7s} {vname}.safetensors  {detail}".rstrip())
        ww = f"{meta['window']} / {meta['stride']}" if meta["family"] == "grassmann" else "-"
        rows.append(f"| {vname}.safetensors | {meta['family']} | {ww} | {meta['n_params']} | {len(blob)} B |")
        sums.append(f"    {hashlib.sha256(blob).hexdigest()}  {vname}.safetensors")
        print(f"{vname:24s} {len(blob):7d} B  loss {tensors['out.loss'].item():.6f}  "
              f"adamw.losses {[round(x, 4) for x in tensors['adamw.losses'].tolist()]}")
    if not args.check:
        readme = os.path.join(OUT_DIR, "README.md")
        text = open(readme).read() if os.path.exists(readme) else ""
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + text[text.index(END) + len(END) + 1:]
        section = SECTION.format(begin=BEGIN, end=END, torch_version=torch.__version__,
                                 numpy_version=np.__version__, tokens_seed=TOKENS_SEED, init_seed=INIT_SEED,
                                 rows="\n".join(rows), checksums="\n".join(sums))
        text = text.rstrip("\n") + "\n\n" + section
        with open(readme, "w") as f:
            f.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
