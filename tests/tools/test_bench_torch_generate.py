#!/usr/bin/python3
"""test_bench_torch_generate.py — `tools/bench_torch.py RECIPE --generate` on a tiny quickstart
(V 512, max_len 32): the KV-cache check passes and both families print their table, the
recipe's family first, with a row per context 16, 32 and recompute timed only up to 16.
Exit 77 (meson: skipped) without Debian's python3-torch.

    tests/tools/test_bench_torch_generate.py [SOURCE_ROOT]
"""
import os
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode:
    print("SKIP: /usr/bin/python3 lacks torch")
    sys.exit(77)
cmd = ["/usr/bin/python3", os.path.join(root, "tools", "bench_torch.py"),
       os.path.join(root, "recipes", "quickstart.ini"), "--generate", "--recompute-max", "16",
       "--threads", "1", "--n", "2", "--set", "tokenizer.vocab_size=512", "--set", "data.seq_len=32"]
p = subprocess.run(cmd, capture_output=True, text=True)
out = p.stdout
print(out, p.stderr, sep="")
assert p.returncode == 0, f"exit status {p.returncode}"
lines = out.splitlines()
assert lines[0].startswith("check: kv-cache logits match full forward (max rel err "), lines[0]
heads = [i for i, l in enumerate(lines) if l.startswith("generate: ")]
assert len(heads) == 2, heads
for i, (fam, impl) in zip(heads, [("grassmann", "torch-recompute"), ("transformer", "torch-kvcache")]):
    assert lines[i] == (f"generate: family={fam} block=post_ln layers=2 d=128 V=512 max_len=32 rows=2 "
                        f"threads=1 impl={impl}"), lines[i]
    assert lines[i + 1].split("\t") == ["ctx", "prefill_tok_s", "decode_ms_per_step", "decode_tok_s",
                                        "state_mb", "recompute_ms_per_token"], lines[i + 1]
    rows = [lines[i + 2].split("\t"), lines[i + 3].split("\t")]
    assert [r[0] for r in rows] == ["16", "32"], rows
    assert all(len(r) == 6 and all(float(x) > 0 for x in r[1:4]) for r in rows), rows
    assert float(rows[0][5]) > 0 and rows[1][5] == "-", rows
    assert lines[i + 4].startswith("head_ms_per_step: "), lines[i + 4]
    assert lines[i + 5].startswith("pick_ms_per_step: "), lines[i + 5]
    assert lines[i + 6].startswith("decode_ms_ratio_last_over_first: "), lines[i + 6]
# state: the KV cache grows with the context (2 rows x 2 layers x (K, V) x ctx x 128 floats)
t = heads[1]
assert float(lines[t + 3].split("\t")[4]) == round(2 * 2 * 2 * 32 * 128 * 4 / 1048576.0, 3)
print("test_bench_torch_generate: OK")
