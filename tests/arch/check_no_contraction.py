"""check_no_contraction.py BUILD_ROOT — no compile of gflow contracts a multiply and an add into one
rounding (docs/cuda.md "Building", docs/performance.md "-Dcpu"): every C compile in
compile_commands.json has -ffp-contract=off, every nvcc compile of a kernel -fmad=false, every
emulator compile of a kernel (cucc.sh) -ffp-contract=off. The bit-for-bit claims (AdamW on CPU
and GPU, fused ops against their chains) rest on it. Prints one line per kind and "ok"/"FAIL"."""
import json
import os
import sys

build = sys.argv[1]
bad = []
with open(os.path.join(build, "compile_commands.json")) as f:
    cmds = json.load(f)
c = [e for e in cmds if e["file"].endswith(".c")]
bad += [e["file"] for e in c if "-ffp-contract=off" not in e["command"]]
with open(os.path.join(build, "build.ninja")) as f:
    lines = [l for l in f if l.lstrip().startswith("COMMAND =")]
nv = [l for l in lines if "nvcc.sh" in l]
cu = lambda l: next((w for w in l.split() if w.endswith(".cu")), l.strip())
bad += [cu(l) for l in nv if "-fmad=false" not in l]
emu = [l for l in lines if "cucc.sh" in l]
bad += [cu(l) for l in emu if "-ffp-contract=off" not in l]
print(f"{len(c)} C compiles, {len(nv)} nvcc compiles, {len(emu)} emulator kernel compiles")
if not c:
    bad.append("no C compile in compile_commands.json")
for b in bad:
    print(f"FAIL  contracted: {b}")
print("ok    no contraction" if not bad else f"FAIL  {len(bad)} compiles may contract")
sys.exit(1 if bad else 0)
