#!/usr/bin/python3
"""check_owners.py — a piece of state with one owner is driven from that owner alone.

Outside the stage that defines them, the calls below are made only from their owner's file
(docs/architecture.md "Devices"): the training step's queue (gflow/optim.h) and its CUDA graph
(gflow/device.h) from the GPU step, src/train/gpu_step.c. Fails naming file:line for each call
made elsewhere in src/.

    tests/arch/check_owners.py [SOURCE_ROOT]
"""
import os
import re
import sys

# (calls, the folders that define them, the one file outside those that may make them)
OWNED = [
    (re.compile(r"\bgf_step_queue_\w+\s*\("), ("src/optim/",), "src/train/gpu_step.c"),
    (re.compile(r"\bgf_cuda_graph_(begin|launch|replay|free)\s*\("), ("src/core/",), "src/train/gpu_step.c"),
]
SOURCE_EXT = (".c", ".h", ".cc", ".cu", ".cuh")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def code_lines(text):
    """The file's lines with comments blanked (line numbers kept)."""
    return COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text).split("\n")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    errors, n_files = [], 0
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            n_files += 1
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                lines = code_lines(f.read())
            for calls, homes, owner in OWNED:
                if rel == owner or rel.startswith(homes):
                    continue
                for lineno, line in enumerate(lines, 1):
                    m = calls.search(line)
                    if m:
                        errors.append(f"{rel}:{lineno}: calls {m.group(0).rstrip('( ')}, which only {owner} may "
                                      f"call outside {', '.join(homes)} (its owner)")
    for e in errors:
        print(e)
    print(f"check_owners: {n_files} files")
    # the line tools/test.sh sums over suites
    print(f"{0 if errors else 1} passed, {1 if errors else 0} failed")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
