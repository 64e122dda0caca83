#!/usr/bin/env bash
# tools/make_corpus.sh OUT SIZE_MB — a plain-text corpus for measuring dataset = text at scale:
# copies of WikiText-2's train split, each with its lines in another order (python3's
# random.Random(seed + copy), seed 47), until OUT holds SIZE_MB MB (10^6 bytes; the last copy is
# cut at a line end). The same arguments give the same bytes. Reads
# $GFLOW_DATA_MIRROR/wikitext-2/wiki.train.tokens, else `gflow data dir`'s data directory
# (GFLOW=path of gflow, default build/gflow).
set -euo pipefail
[ $# = 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ] || { echo "usage: $0 OUT SIZE_MB" >&2; exit 2; }
out=$1 mb=$2
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${GFLOW_DATA_MIRROR:-}" ]; then src=$GFLOW_DATA_MIRROR/wikitext-2/wiki.train.tokens
else src="$("${GFLOW:-$root/build/gflow}" data dir | awk -F'\t' '$1 == "data" {print $2}')/wikitext-2/wiki.train.tokens"; fi
[ -f "$src" ] || { echo "make_corpus: $src not found (gflow data fetch wikitext2, or set GFLOW_DATA_MIRROR)" >&2; exit 1; }
python3 - "$src" "$out" "$mb" <<'PY'
import os, random, sys
src, out, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(src, "rb").read().split(b"\n")[:-1]
want, have, copy = mb * 10**6, 0, 0
with open(out + ".part", "wb") as f:
    while have < want:
        order = lines[:]
        random.Random(47 + copy).shuffle(order)
        for l in order:
            if have >= want:
                break
            f.write(l + b"\n")
            have += len(l) + 1
        copy += 1
os.replace(out + ".part", out)
print("make_corpus: %s: %.1f MB, %d shuffled copies of %s" % (out, have / 1e6, copy, src), file=sys.stderr)
PY
