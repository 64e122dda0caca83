#!/usr/bin/python3
"""check_circles.py — no two files of src/ call into each other.

A file uses another when it names a function or variable that the other alone defines (not
static; a name defined in several files, such as a CPU and an emulated twin, ties none). Two files
that use each other are one piece of work cut in two, or a lower one that calls back up: either
way a reader walks back and forth. Fails naming both files and the names each takes from the
other (docs/architecture.md "Stages").

    tests/arch/check_circles.py [SOURCE_ROOT]
"""
import os
import re
import sys

SOURCE_EXT = (".c", ".cc", ".cu")
# Circles known when this check was written, in parts then being reworked elsewhere (the dataset
# table, the device dispatch table): each is reported as a note, not a failure, and is taken out
# here once it is opened.
KNOWN = set()
COMMENT_OR_STRING = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
NAME = re.compile(r"\bgf_\w+")
# at column 0: a definition's head up to "{" or "=" (a declaration ends at ";" first)
TOP_DEF = re.compile(r"^(?!static\b|extern\b|typedef\b|#)[A-Za-z_][^;{=]*?\b(gf_\w+)\s*(?:\(|\[|=)[^;]*?(?:\{|=)",
                     re.M | re.S)


def code(text):
    """The text with comments and string literals blanked (line numbers kept)."""
    return COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    texts = {}
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for name in sorted(files):
            if name.endswith(SOURCE_EXT):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    texts[os.path.relpath(path, root)] = code(f.read())
    homes = {}  # name -> the files that define it
    for rel, text in texts.items():
        for m in TOP_DEF.finditer(text):
            homes.setdefault(m.group(1), set()).add(rel)
    uses = {}  # (user, home) -> names
    for rel, text in texts.items():
        for name in set(NAME.findall(text)):
            home = homes.get(name)
            if home and len(home) == 1 and rel not in home:
                uses.setdefault((rel, next(iter(home))), set()).add(name)
    errors, notes = [], []
    for (a, b), names in sorted(uses.items()):
        if a < b and (b, a) in uses:
            line = f"{a} <-> {b}: {a} uses {', '.join(sorted(names))}; {b} uses {', '.join(sorted(uses[(b, a)]))}"
            (notes if (a, b) in KNOWN else errors).append(line)
    for n in notes:
        print(f"note (known circle): {n}")
    for e in errors:
        print(f"two-file circle: {e}")
    print(f"check_circles: {len(texts)} files, {len(homes)} names defined")
    # the line tools/test.sh sums over suites
    print(f"{0 if errors else 1} passed, {1 if errors else 0} failed")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
