#!/usr/bin/python3
"""test_fixture_check.py — the tolerance of `tools/make_fixtures*.py --check`
(tools/safetensors_io.compare): a committed golden fixture compared with itself is 'same'; moved
within the stated bounds it is 'close' (passes); moved past them, or with an input, a weight, the
metadata or a tensor's shape changed, or a NaN, it is 'DIFFERS' (fails), naming the tensor.
Needs numpy only (no torch): exit 77 (meson: skipped) without it.

    tests/tools/test_fixture_check.py [SOURCE_ROOT]
"""
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
try:
    import numpy as np
except ImportError:
    print("SKIP: no numpy")
    sys.exit(77)
sys.path.insert(0, os.path.join(root, "tools"))
import safetensors_io as st  # noqa: E402

failed = 0


def expect(name, path, tensors, meta, verdict, words=""):
    global failed
    got, detail = st.compare(path, tensors, meta)
    ok = got == verdict and words in detail
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {got} {detail}")


for fx in ("grassmann_post_B", "nli_transformer"):
    path = os.path.join(root, "tests", "fixtures", "golden", fx + ".safetensors")
    base, meta = st.load(path)

    def moved(name, fn):
        t = {k: v.copy() for k, v in base.items()}
        t[name] = fn(t[name]).astype(t[name].dtype)
        return t

    grad = next(k for k in sorted(base) if k.startswith("grad."))
    weight = next(k for k in sorted(base) if not k.startswith(("grad.", "adamw.", "out.", "input")))
    gmax = float(np.max(np.abs(base[grad])))
    expect(f"{fx} itself", path, base, meta, "same")
    # gradients: a quarter of the golden rule (1e-4 of the tensor's largest)
    expect(f"{fx} {grad} + 1e-5 max", path, moved(grad, lambda a: a + 1e-5 * gmax), meta, "close", grad)
    expect(f"{fx} {grad} + 5e-5 max", path, moved(grad, lambda a: a + 5e-5 * gmax), meta, "DIFFERS", grad)
    # logits: a quarter of 3e-5 + 1e-5 |ref|
    expect(f"{fx} logits + 5e-6", path, moved("out.logits", lambda a: a + 5e-6), meta, "close")
    expect(f"{fx} logits + 2e-5", path, moved("out.logits", lambda a: a + 2e-5), meta, "DIFFERS", "out.logits")
    # the AdamW trajectory: the golden rule itself (relative 1e-4 per step)
    expect(f"{fx} gnorm * (1 + 6e-5)", path, moved("adamw.gnorm", lambda a: a * (1 + 6e-5)), meta, "close")
    expect(f"{fx} gnorm * (1 + 2e-4)", path, moved("adamw.gnorm", lambda a: a * (1 + 2e-4)), meta, "DIFFERS",
           "adamw.gnorm")
    expect(f"{fx} loss NaN", path, moved("out.loss", lambda a: a * np.nan), meta, "DIFFERS", "out.loss")
    # what the test feeds gflow must be the same bits
    expect(f"{fx} {weight} by 1 ulp", path, moved(weight, lambda a: np.nextafter(a, np.inf)), meta, "DIFFERS",
           weight)
    expect(f"{fx} input changed", path, moved("input.tokens", lambda a: (a + 1) % 2) if "input.tokens" in base
           else moved(next(k for k in base if k.startswith("input")), lambda a: a + 1), meta, "DIFFERS", "input")
    expect(f"{fx} metadata changed", path, base, {**meta, "family": "other"}, "DIFFERS", "metadata")
    expect(f"{fx} shape changed", path, moved(grad, lambda a: a.reshape(-1)[:-1] if a.size > 1 else a[:0]), meta,
           "DIFFERS", grad)
    expect(f"{fx} missing file", path + ".absent", base, meta, "DIFFERS", "cannot read")

# a bf16 fixture: its own bounds (a quarter of test_golden.c's bf16_exact, the whole of bf16_autocast)
path = os.path.join(root, "tests", "fixtures", "golden", "grassmann_post_A.bf16.safetensors")
base, meta = st.load(path)
ag = next(k for k in sorted(base) if k.startswith("autocast.grad."))
amax = float(np.max(np.abs(base[ag])))
expect("bf16 itself", path, base, meta, "same")
expect("bf16 logits + 2e-4", path, moved("out.logits", lambda a: a + 2e-4), meta, "close")
expect("bf16 logits + 2e-3", path, moved("out.logits", lambda a: a + 2e-3 + 1e-3 * np.abs(a)), meta, "DIFFERS",
       "out.logits")
expect(f"bf16 {ag} + 7e-2 max", path, moved(ag, lambda a: a + 7e-2 * amax), meta, "close", ag)
expect(f"bf16 {ag} + 9e-2 max", path, moved(ag, lambda a: a + 9e-2 * amax), meta, "DIFFERS", ag)
expect("bf16 autocast logits + 4e-2", path, moved("autocast.out.logits", lambda a: a + 4e-2), meta, "close",
       "autocast.out.logits")
expect("bf16 autocast logits + 6e-2 + 4e-2 |a|", path,
       moved("autocast.out.logits", lambda a: a + 6e-2 + 4e-2 * np.abs(a)), meta, "DIFFERS", "autocast.out.logits")
expect("bf16 autocast logits NaN", path, moved("autocast.out.logits", lambda a: a * np.nan), meta, "DIFFERS",
       "autocast.out.logits")

print(f"{'FAILED' if failed else 'passed'}: {failed} failing case(s)")
sys.exit(1 if failed else 0)
