#!/usr/bin/python3
"""check_backend.py — the device seam: code reaches a device only through its backend table.

docs/architecture.md "Devices" and "A backend". For each device of gf_device (gflow/tensor.h)
other than the CPU, say `cuda`, its code lives in the folders src/<stage>/cuda/, and:
  1. its kernels' entries (gf_<op>..._cuda for an op of gflow/ops.def, and the optimizer loops
     named in its table src/optim/cuda/backend_cuda.c) are called from those folders alone: the
     op entries, tape.c, params.c and adamw.c go through gf_backend_of(device);
  2. no file compares a device with GF_DEV_CUDA (a branch per device) but those folders and
     the ALLOWED files below; comparing with GF_DEV_CPU (host or not) is free;
  3. the op entries (src/ops/*.c) call no gf_cuda_* function;
  4. every backend has its tables, each with an entry for every field: the root
     (src/core/backend_cpu.c, src/core/cuda/backend_cuda.c: the fields of gf_backend), the ops
     (src/ops/backend_cpu.c, src/ops/cuda/backend_cuda.c: every op of ops.def and the other
     fields of gf_backend_ops), the optimizer's (src/optim/cuda/backend_cuda.c: those of
     gf_backend_optim; the CPU's loops are adamw.c's), and src/core/device.c registers the root.
Fails naming file:line (or the table and the missing entry) for each breach.

    tests/arch/check_backend.py [SOURCE_ROOT]
"""
import os
import re
import sys

# files that may branch on a device other than the CPU, and why
ALLOWED = {
    "src/recipe/recipe.c": "refuses `[run] device = cuda` in a build without CUDA, at the recipe's key",
    "src/cli/cmd_bench.c": "bench's GPU measurements (cuBLAS peak, --tf32) before the session",
}
SOURCE_EXT = (".c", ".h", ".cc", ".cu", ".cuh")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def code_lines(text):
    """The file's lines with comments blanked (line numbers kept)."""
    return COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text).split("\n")


def struct_fields(text, name):
    """The function-pointer and pointer fields of `typedef struct name {...}` in text."""
    body = re.search(r"typedef struct " + name + r" \{(.*?)\n\} " + name + ";", text, re.S)
    assert body, f"no typedef struct {name}"
    code = "\n".join(code_lines(body.group(1)))
    fields = re.findall(r"\(\*(\w+)\)\s*\(", code) + re.findall(r"\*\s*(\w+);", code)
    return [f for f in dict.fromkeys(fields) if f != "name"]


def table_entries(text):
    """The designated initialisers `.field = value` of a table file."""
    return dict(re.findall(r"^\s*\.(\w+)\s*=\s*([^,\n]+),", "\n".join(code_lines(text)), re.M))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    errors = []
    devices = [d.lower() for d in re.findall(r"GF_DEV_(\w+)\s*=", read(root, "include/gflow/tensor.h"))]
    ops = re.findall(r"^GF_OP\((\w+)\)", read(root, "include/gflow/ops.def"), re.M)
    ops_fields = ops + [f for f in struct_fields(read(root, "src/ops/backend_ops.h"), "gf_backend_ops") if f not in ops]
    root_fields = struct_fields(read(root, "include/gflow/backend.h"), "gf_backend")
    optim_fields = struct_fields(read(root, "include/gflow/optim.h"), "gf_backend_optim")

    # 4. the tables
    registry = "\n".join(code_lines(read(root, "src/core/device.c")))
    for dev in devices:
        sub = "" if dev == "cpu" else f"{dev}/"
        tables = [(f"src/core/{sub}backend_{dev}.c", root_fields), (f"src/ops/{sub}backend_{dev}.c", ops_fields)]
        if dev != "cpu":
            tables.append((f"src/optim/{sub}backend_{dev}.c", optim_fields))
        for rel, fields in tables:
            if not os.path.isfile(os.path.join(root, rel)):
                errors.append(f"{rel}: missing: the {dev} backend's table")
                continue
            have = table_entries(read(root, rel))
            for f in fields:
                if f not in have:
                    errors.append(f"{rel}: no entry .{f} (every backend's table has every field; see docs/architecture.md)")
        if not re.search(rf"\[GF_DEV_{dev.upper()}\]\s*=\s*&gf_backend_{dev}\b", registry):
            errors.append(f"src/core/device.c: gf_backend_find does not register gf_backend_{dev}")

    # 1-3. the calls and branches, per device other than the CPU
    others = [d for d in devices if d != "cpu"]
    n_files = 0
    for dev in others:
        optim_table = os.path.join(root, f"src/optim/{dev}/backend_{dev}.c")
        optim_fns = list(table_entries(read(root, os.path.relpath(optim_table, root))).values()) if os.path.isfile(optim_table) else []
        kernel = re.compile(r"\b(gf_(?:" + "|".join(ops) + r")(?:_\w+)?_" + dev
                            + "".join(r"|" + re.escape(f) for f in optim_fns) + r")\s*\(")
        branch = re.compile(r"([!=]=\s*GF_DEV_" + dev.upper() + r"\b|\bGF_DEV_" + dev.upper() + r"\s*[!=]=)")
        for dirpath, _, files in os.walk(os.path.join(root, "src")):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if f"/{dev}/" in rel:
                    continue  # the backend's own folders
                n_files += 1
                op_entry = re.fullmatch(r"src/ops/\w+\.c", rel) is not None
                for i, line in enumerate(code_lines(read(root, rel)), 1):
                    m = kernel.search(line)
                    if m:
                        errors.append(f"{rel}:{i}: calls {m.group(1)}: go through the {dev} backend's table "
                                      f"(gf_backend_of(device), gflow/backend.h)")
                    if branch.search(line) and rel not in ALLOWED:
                        errors.append(f"{rel}:{i}: branches on GF_DEV_{dev.upper()}: put the device's part in its "
                                      f"backend table (or, with a reason, in ALLOWED of tests/arch/check_backend.py)")
                    m = re.search(rf"\bgf_{dev}_\w+\s*\(", line)
                    if op_entry and m:
                        errors.append(f"{rel}:{i}: an op entry calls {m.group(0)[:-1].strip()}: hand the inputs "
                                      f"to the table (gf_op_backend, op_util.h)")
    for e in errors:
        print(e)
    print(f"check_backend: devices {', '.join(devices)}; {len(ops)} ops; {n_files} files scanned")
    # the line tools/test.sh sums over suites
    print(f"{0 if errors else 1} passed, {1 if errors else 0} failed")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
