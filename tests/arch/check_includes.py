#!/usr/bin/python3
"""check_includes.py — every #include in src/ and include/ follows the stage order.

Stages, each a folder src/<stage>/ (a header include/gflow/<x>.h belongs to the stage of its
.c files, listed in HEADER_STAGE):
    core < ops < nn < optim < data < recipe < train < probe < cli
A file may include headers of its own stage or of an earlier one, never of a later one. A
private header (src/<stage>/*.h) is included only from its own folder. The umbrella header
gflow.h is for cli/ and the tests only. Fails naming file:line for each include against this.
The stage map itself is checked too: every file of include/gflow/ has its stage in HEADER_STAGE,
every name there is a file, and the stage table of docs/architecture.md lists, per stage, exactly
the headers HEADER_STAGE gives it.

    tests/arch/check_includes.py [SOURCE_ROOT]
"""
import os
import re
import sys

STAGES = ["core", "ops", "nn", "optim", "data", "recipe", "train", "probe", "cli"]
RANK = {s: i for i, s in enumerate(STAGES)}

# include/gflow/<name> -> stage; a new public header must be given one here
HEADER_STAGE = {
    "arena.h": "core", "dist.h": "core", "error.h": "core", "fs.h": "core", "params.h": "core",
    "rng.h": "core", "tape.h": "core", "tensor.h": "core", "threads.h": "core", "version.h": "core",
    "device.h": "core", "cuda.h": "core", "backend.h": "core",
    "ops.h": "ops", "ops.def": "ops", "datasets.def": "data",
    "blocks.h": "nn", "model.h": "nn", "nli.h": "nn", "decoder.h": "nn",
    "optim.h": "optim",
    "data.h": "data", "tokenizer.h": "data",
    "recipe.h": "recipe", "ini.h": "recipe",
    "ablate.h": "train", "checkpoint.h": "train", "safetensors.h": "train", "train.h": "train",
    "session.h": "train", "task.h": "train", "rundir.h": "train", "gpu_step.h": "train",
    "probe.h": "probe",
}

UMBRELLA = "include/gflow.h"

# (including file prefix, included file): allowed for now.
WHITELIST = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXT = (".c", ".h", ".cc", ".def", ".in", ".cu", ".cuh")  # src/<stage>/cuda/ belongs to <stage>


def stage_of(rel):
    """Stage of a repository-relative path, 'umbrella' for gflow.h, None if unknown."""
    if rel == UMBRELLA:
        return "umbrella"
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) >= 3 and parts[1] in RANK:
        return parts[1]
    if parts[0] == "include" and len(parts) == 3 and parts[1] == "gflow":
        return HEADER_STAGE.get(parts[2])
    return None


def resolve(root, src_rel, target):
    """The included file as a repository-relative path (the build's search order), or None."""
    for base in (os.path.dirname(src_rel), "include", "src"):
        cand = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def whitelisted(src_rel, tgt_rel):
    return any(src_rel.startswith(p) and tgt_rel == t for p, t in WHITELIST)


def check_include(src_rel, tgt_rel):
    """A message when the include goes against the rules, else None."""
    s, t = stage_of(src_rel), stage_of(tgt_rel)
    if whitelisted(src_rel, tgt_rel):
        return None
    if s is None:
        return "is in no stage (add its header to HEADER_STAGE in tests/arch/check_includes.py)"
    if t is None:
        return f'includes "{tgt_rel}", which is in no stage (add it to HEADER_STAGE)'
    if s == "umbrella":
        return None  # gflow.h lists every public header
    if t == "umbrella":
        return None if s == "cli" else f"includes gflow.h (the umbrella header is for cli/ and tests only; stage {s})"
    if RANK[t] > RANK[s]:
        return f'includes "{tgt_rel}" of the later stage {t} from stage {s} (order: {" < ".join(STAGES)})'
    if tgt_rel.startswith("src/") and not src_rel.startswith(f"src/{t}/"):
        return f'includes the private header "{tgt_rel}" of stage {t} from outside src/{t}/'
    return None


def check_map(root):
    """Messages where HEADER_STAGE, include/gflow/ and docs/architecture.md's stage table differ."""
    errors = []
    present = set(os.listdir(os.path.join(root, "include", "gflow")))
    for name in sorted(present - set(HEADER_STAGE)):
        errors.append(f"include/gflow/{name}: in no stage (give it one in HEADER_STAGE of tests/arch/check_includes.py)")
    for name in sorted(set(HEADER_STAGE) - present):
        errors.append(f"tests/arch/check_includes.py: HEADER_STAGE names include/gflow/{name}, which is not there")
    doc = "docs/architecture.md"
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        rows = {}
        for lineno, line in enumerate(f, 1):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0] in RANK and cells[1] == f"`src/{cells[0]}/`":
                rows[cells[0]] = (lineno, set(" ".join(re.findall(r"`([^`]*)`", cells[2])).split()))
    for stage in STAGES:
        want = {h for h, s in HEADER_STAGE.items() if s == stage}
        if stage not in rows:
            errors.append(f"{doc}: the stage table has no row for {stage}")
            continue
        lineno, listed = rows[stage]
        for h in sorted(want - listed):
            errors.append(f"{doc}:{lineno}: the {stage} row does not list {h} (HEADER_STAGE gives it {stage})")
        for h in sorted(listed - want):
            errors.append(f"{doc}:{lineno}: the {stage} row lists {h}, which HEADER_STAGE does not give {stage}")
    return errors


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    errors, n_files = check_map(root), 0
    for top in ("src", "include"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, name)
                src_rel = os.path.relpath(path, root)
                n_files += 1
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        tgt_rel = resolve(root, src_rel, m.group(1))
                        if tgt_rel is None:
                            errors.append(f'{src_rel}:{lineno}: includes "{m.group(1)}", found neither beside it nor under include/ or src/')
                            continue
                        msg = check_include(src_rel, tgt_rel)
                        if msg:
                            errors.append(f"{src_rel}:{lineno}: {msg}")
    for e in errors:
        print(e)
    print(f"check_includes: {n_files} files, stage order {' < '.join(STAGES)}")
    # the line tools/test.sh sums over suites
    print(f"{0 if errors else 1} passed, {1 if errors else 0} failed")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
