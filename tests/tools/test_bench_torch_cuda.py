#!/usr/bin/python3
"""test_bench_torch_cuda.py — `tools/bench_torch.py --device cuda` where it can and cannot run,
and the CPU path as it was:

  - the options: the device's defaults (eager on the CPU; eager and torch.compile, an 8192^3
    peak and SDPA attention on a GPU), --compile, and the combinations refused as usage errors;
  - without a usable GPU (torch built without CUDA, or none visible) --device cuda ends with one
    line on stderr naming it, status 1, no traceback; torch.compile on a torch without it too;
  - the CPU path prints the fields it always printed, in their order (tools/bench.sh reads them);
  - where this torch has F.scaled_dot_product_attention, the SDPA attention agrees with
    torch_ref's; where it also has a GPU, a short --device cuda run prints its fields.
The interpreter is this one if it has torch (on a GPU machine: `python3 tests/tools/...`), else
/usr/bin/python3; exit 77 (meson: skipped) where neither has it.

    tests/tools/test_bench_torch_cuda.py [SOURCE_ROOT]
"""
import os
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
py = next((p for p in (sys.executable, "/usr/bin/python3")
           if p and subprocess.run([p, "-c", "import torch"], capture_output=True).returncode == 0), None)
if py is None:
    print("SKIP: neither this python nor /usr/bin/python3 has torch")
    sys.exit(77)
if py != sys.executable:
    os.execv(py, [py, __file__] + sys.argv[1:])

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(root, "tools"))
import bench_torch  # noqa: E402

script = os.path.join(root, "tools", "bench_torch.py")
recipe = os.path.join(root, "recipes", "quickstart.ini")
tiny = ["--set", "tokenizer.vocab_size=512", "--set", "data.seq_len=32"]


def run(*args):
    p = subprocess.run([py, script, recipe] + list(args), capture_output=True, text=True)
    print(f"$ bench_torch.py quickstart {' '.join(args)}\n{p.stdout}{p.stderr}", end="")
    return p


def usage_error(*args):
    try:
        bench_torch.parse_args([recipe] + list(args))
    except SystemExit as e:
        return e.code == 2
    return False


# ---- options ----
a = bench_torch.parse_args([recipe])
assert (a.device, a.modes, a.peak_n, a.attn, a.tf32) == ("cpu", ["eager"], 2048, "manual", False), vars(a)
a = bench_torch.parse_args([recipe, "--device", "cuda"])
sdpa = hasattr(F, "scaled_dot_product_attention")
assert (a.modes, a.peak_n, a.attn) == (["eager", "compile"], 8192, "sdpa" if sdpa else "manual"), vars(a)
assert bench_torch.parse_args([recipe, "--device", "cuda", "--compile"]).modes == ["compile"]
assert bench_torch.parse_args([recipe, "--device", "cuda", "--mode", "eager"]).modes == ["eager"]
assert bench_torch.parse_args([recipe, "--mode", "both"]).modes == ["eager", "compile"]
assert bench_torch.parse_args([recipe, "--device", "cuda", "--peak-n", "0", "--attn", "manual"]).peak_n == 0
for bad in (["--device", "tpu"], ["--mode", "jit"], ["--compile", "--mode", "eager"], ["--tf32"],
            ["--device", "cuda", "--generate"], ["--generate", "--compile"], ["--compile", "--warmup", "0"],
            ["--attn", "flash"]):
    assert usage_error(*bad), bad

# ---- what this torch cannot do: one line, status 1 ----
if not torch.cuda.is_available():
    p = run("--device", "cuda", *tiny)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(err) == 1 and p.stdout == "", (p.returncode, err)
    assert err[0].startswith("bench_torch: --device cuda: this torch (") and "cannot use a GPU" in err[0], err
if not hasattr(torch, "compile"):
    p = run("--compile", *tiny)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(err) == 1 and "torch.compile needs PyTorch 2.0" in err[0], (p.returncode, err)

# ---- the CPU path: the fields tools/bench.sh and the docs read, in their order ----
p = run("--steps", "1", "--warmup", "0", "--threads", "1", "--peak-n", "64", *tiny)
assert p.returncode == 0, p.returncode
lines = p.stdout.splitlines()
assert lines[0] == (f"bench_torch: {recipe} family=grassmann block=post_ln layers=2 d=128 V=512 L=32 B=16 "
                    f"threads=1 torch={torch.__version__}"), lines[0]
keys = [l.split(":")[0] for l in lines[1:]]
assert keys == ["params", "steps", "loss_last", "tokens_per_s", "ms_per_step", "ms_forward", "ms_backward",
                "ms_optimizer", "flops_per_token_fwd", "flops_per_step_train", "achieved_gflops",
                "sgemm_peak_gflops", "mfu_pct", "peak_rss_mb"], keys
assert lines[2] == "steps: 1 (after 0 warmup)" and lines[12].endswith("(64^3 torch.matmul)"), lines
assert float(lines[4].split()[1]) > 0 and len(lines[5].split()[1].split(".")[1]) == 1, lines  # ms as before: .1f

# ---- SDPA against the reference attention (PyTorch 2.x) ----
if sdpa:
    cfg = bench_torch.ModelConfig(family="transformer", V=64, d=32, heads=4, dff=64, n_layers=2, Lmax=20, dropout=0.0)
    bench_torch.check_sdpa(cfg, "cpu")  # exits 1 when they differ

# ---- a GPU: a short run of each family prints the GPU's fields ----
if torch.cuda.is_available():
    for fam in ("grassmann", "transformer"):
        p = run("--device", "cuda", "--mode", "eager", "--steps", "2", "--warmup", "1", "--peak-n", "256",
                "--set", f"model.family={fam}", *tiny)
        assert p.returncode == 0, p.returncode
        out = p.stdout
        head = next(l for l in out.splitlines() if l.startswith("bench_torch: "))
        attn = f" attn={'sdpa' if sdpa else 'manual'}" if fam == "transformer" else ""
        assert f"family={fam}" in head and head.endswith(f" device=cuda mode=eager{attn}"), head
        for key in ("gpu: ", "tokens_per_s: ", "ms_forward: ", "warmup_s: ", "sgemm_peak_gflops: ", "mfu_pct: ",
                    "peak_device_mb: ", "device_reserved_mb: "):
            assert "\n" + key in "\n" + out, key
print("test_bench_torch_cuda: OK")
