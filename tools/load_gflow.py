#!/usr/bin/python3
"""load_gflow.py — load a `gflow export` file into the PyTorch reference model.

    from load_gflow import load_gflow
    model, cfg = load_gflow("model.safetensors")      # eval mode, float32, CPU
    logits = model(torch.tensor([[1, 2, 3]]))           # (B, L, V)

The export's metadata holds the resolved recipe (INI) and the vocabulary size; the model is
tools/torch_ref.py's GrassmannLM / TransformerLM with the same parameter names, so loading is a
plain load_state_dict(strict=True).

    /usr/bin/python3 tools/load_gflow.py MODEL.safetensors --check TOKENS_AND_LOGITS.safetensors
compares the model's logits with logits gflow computed (used by the C test test_export_torch).
"""
import configparser
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import load  # noqa: E402
from torch_ref import ModelConfig, build_model  # noqa: E402


def _ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def load_gflow(path):
    tensors, meta = load(path)
    ini = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    ini.read_string(meta["recipe"])
    m = ini["model"]
    t = lambda k: m.get(k).strip().lower() == "true"  # noqa: E731
    cfg = ModelConfig(family=m.get("family"), block=m.get("block"), V=int(meta["vocab"]), d=m.getint("d_model"),
                      r=m.getint("r"), dff=m.getint("d_ff"), heads=m.getint("heads"), n_layers=m.getint("n_layers"),
                      Lmax=m.getint("max_len"), dropout=0.0, offsets=_ints(m.get("offsets")),
                      offset_schedule=_ints(m.get("offset_schedule")), normalize=t("normalize"), gate=t("gate"),
                      plucker=t("plucker"), eps=m.getfloat("eps"),
                      ln_eps=m.getfloat("ln_eps"))
    model = build_model(cfg)
    state = {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()}
    model.load_state_dict(state, strict=True)
    return model.eval(), cfg


if __name__ == "__main__":
    model, cfg = load_gflow(sys.argv[1])
    if len(sys.argv) == 4 and sys.argv[2] == "--check":
        ref, _ = load(sys.argv[3])
        tok = torch.from_numpy(np.array(ref["check.tokens"]).astype(np.int64))
        with torch.no_grad():
            got = model(tok).numpy()
        want = np.array(ref["check.logits"])
        err = float(np.max(np.abs(got - want)))
        print(f"{cfg.family}/{cfg.block}: max |logit diff| {err:.3e} over {want.size} logits")
        sys.exit(0 if err <= 1e-4 + 1e-4 * float(np.max(np.abs(want))) else 1)
    print(f"loaded {sum(p.numel() for p in model.parameters())} parameters: {cfg}")
