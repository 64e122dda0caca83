#!/usr/bin/python3
"""check_simd_loops.py — the `#pragma omp simd` loops of the element-wise kernels vectorise.

GCC keeps a loop scalar, silently, when something in it stops if-conversion (a `?:` over FP
arithmetic under -ftrapping-math did it to every loop calling gf_expf: GELU ran 4x slower).
This compiles each file below with the build's own command plus -fopt-info-vec-optimized and
fails naming file:line for each `omp simd` loop GCC did not vectorise. Skipped (exit 77) when
the build's compiler is not GCC, or the build has sanitizers or -O0 (they keep loops scalar).

    tests/arch/check_simd_loops.py SOURCE_ROOT BUILD_DIR
"""
import json
import os
import re
import shlex
import subprocess
import sys

FILES = ["src/ops/gelu.c", "src/ops/head_ce.c", "src/ops/cross_entropy.c", "src/ops/attention.c",
         "src/ops/plucker_mix.c", "src/ops/plucker_window.c", "src/ops/layernorm.c", "src/ops/dropout.c", "src/ops/dropout_add_layernorm.c", "src/ops/layernorm_dropout.c", "src/ops/sigmoid.c", "src/ops/sigmoid_lerp.c", "src/ops/gemm.c", "src/ops/op_util.c",
         "src/optim/adamw.c"]

# file:line of loops known to stay scalar, with why (none may be added without a reason)
KNOWN_SCALAR = {
    # GCC 12 reports nothing of its own for the unmasked residual add: it merges it with the
    # masked loop above it (which it vectorises) rather than leaving it scalar
    "src/ops/dropout_add_layernorm.c:64": "merged into the masked loop by GCC 12",
}

VEC = re.compile(r"([^\s:]+\.c):(\d+):\d+: optimized: loop vectorized")


COND = re.compile(r"^\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b\s*(\w*)")


def compiled_lines(lines, defined):
    """per line, whether the compiler sees it: False inside an `#ifdef M` / `#ifndef M` branch (or
    its `#else`) that the -D macros in `defined` switch off; other conditions count as on"""
    stack, out = [], []
    for l in lines:
        m = COND.match(l)
        if m and m.group(1) in ("ifdef", "ifndef"):
            on = (m.group(2) in defined) == (m.group(1) == "ifdef")
            stack.append([on, True])
        elif m and m.group(1) == "if":
            stack.append([True, False])
        elif m and m.group(1) in ("else", "elif") and stack:
            if stack[-1][1]:
                stack[-1][0] = not stack[-1][0]
            else:
                stack[-1][0] = True
        elif m and m.group(1) == "endif" and stack:
            stack.pop()
        out.append(all(on for on, _ in stack))
    return out


def simd_loops(path, defined=frozenset()):
    """(first, last) lines of the loop after each `omp simd` pragma the compiler sees (the build's
    -D macros: a loop in a branch the build leaves out, the fallback of an optional library, is
    not compiled): GCC reports a loop with a braced body at a line inside it"""
    lines = open(path, encoding="utf-8").read().split("\n")
    seen = compiled_lines(lines, defined)
    out = []
    for i, l in enumerate(lines):
        if seen[i] and re.search(r"#\s*pragma\s+omp\s+(parallel\s+for\s+)?simd", l):
            j = i + 1
            while j < len(lines) and "for (" not in lines[j]:
                j += 1
            k, depth = j, lines[j].count("{") - lines[j].count("}")
            while depth > 0 and k + 1 < len(lines):
                k += 1
                depth += lines[k].count("{") - lines[k].count("}")
            out.append((j + 1, k + 1))
    return out


def main():
    root, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    cmds = {os.path.normpath(os.path.join(e["directory"], e["file"])): e
            for e in json.load(open(os.path.join(build, "compile_commands.json")))}
    bad = []
    for rel in FILES:
        src = os.path.normpath(os.path.join(root, rel))
        e = cmds.get(src)
        if e is None:
            bad.append(f"{rel}: not in {build}/compile_commands.json")
            continue
        argv = shlex.split(e["command"])
        ver = subprocess.run([argv[0], "--version"], capture_output=True, text=True).stdout
        if "Free Software Foundation" not in ver or "clang" in ver:
            print(f"SKIP: {argv[0]} is not GCC")
            return 77
        if any(a.startswith("-fsanitize") for a in argv) or "-O0" in argv:
            # the sanitizers' checks (and -O0) keep loops scalar by design: the guarantee is
            # the optimised build's
            print(f"SKIP: {build} builds with sanitizers or -O0")
            return 77
        for k in ("-MD", "-MMD"):
            while k in argv:
                argv.remove(k)
        for k in ("-MQ", "-MF", "-o"):
            while k in argv:
                i = argv.index(k)
                del argv[i:i + 2]
        r = subprocess.run(argv + ["-o", os.devnull, "-fopt-info-vec-optimized"], capture_output=True, text=True,
                           cwd=e["directory"])
        if r.returncode != 0:
            bad.append(f"{rel}: does not compile: {r.stderr[:300]}")
            continue
        done = {int(m.group(2)) for m in VEC.finditer(r.stderr)}
        defined = {a[2:].split("=")[0] for a in argv if a.startswith("-D")}
        for ln, last in simd_loops(src, defined):
            if not any(ln <= d <= last for d in done) and f"{rel}:{ln}" not in KNOWN_SCALAR:
                bad.append(f"{rel}:{ln}: an `omp simd` loop GCC did not vectorise")
    for b in bad:
        print(b)
    print(f"check_simd_loops: {len(bad)} problem(s) in {len(FILES)} files")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
