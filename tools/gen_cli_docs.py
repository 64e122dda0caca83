#!/usr/bin/env python3
"""tools/gen_cli_docs.py GFLOW MAN_OUT COMPLETION_OUT — the manual page gflow(1) and the bash
completion of gflow, both generated at build time from the help texts of the gflow just built
(`gflow --help`, `gflow --version` and `gflow CMD --help` for every command the first lists), so the
help texts in src/cli stay the only source of truth (meson.build runs this; tools/install_check.sh
checks what it writes).

What the completion takes from a command's --help:
  options   every `--name` in its usage block (the lines from `usage:` to the first blank line) or
            at the start of an indented line (an option list);
  values    `--name a|b` offers a and b; `--name PLACEHOLDER` takes a word (files or directories
            for FILE/DIR/RECIPE/CHECKPOINT/*.ext, nothing offered for numbers and text);
  positionals  lower-case words after `gflow CMD` in a usage line (`data fetch wikitext2|snli`),
            `kinds:` lists (`probe curvature`), and for the rest recipe files (*.ini),
            checkpoints (*.ckpt) and run directories, as the placeholders say.
The man page has no date: the same sources give the same bytes (reproducible builds).
"""
import re
import subprocess
import sys


def run(gflow, *args):
    p = subprocess.run([gflow, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gen_cli_docs: `{gflow} {' '.join(args)}` exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def parse_top(text):
    """(one-line description, [(command, summary)], exit-codes line) from `gflow --help`."""
    lines = text.splitlines()
    desc = lines[0].split('—', 1)[-1].strip() if lines else ''
    cmds, exits, in_cmds = [], '', False
    for ln in lines:
        if ln.strip() == 'commands:':
            in_cmds = True
            continue
        m = re.match(r'^  ([a-z][a-z0-9-]*)\s+(.*)$', ln)
        if in_cmds and m:
            cmds.append((m.group(1), m.group(2)))
        elif in_cmds and not ln.strip():
            in_cmds = False
        if ln.startswith('exit codes:'):
            exits = ln[len('exit codes:'):].strip()
    if not cmds:
        sys.exit("gen_cli_docs: `gflow --help` lists no commands")
    return desc, cmds, exits


PLACEHOLDER = re.compile(r'^[A-Z][A-Z0-9_.|]*$|^[A-Za-z_.]+=[A-Za-z_.]+$|^[A-Z]+\.[a-z]+$')


def parse_command(cmd, text):
    """{'opts': {name: value-kind}, 'words': [[word, ...] per position], 'files': glob kinds}."""
    opts, words, files = {}, [], set()
    usage = []   # lines of the usage blocks
    in_usage = False
    for ln in text.splitlines():
        if ln.startswith('usage:'):
            in_usage = True
        elif not ln.strip():
            in_usage = False
        if in_usage:
            usage.append(ln)
        m = re.match(r'^\s+(--[a-z][a-z0-9-]*)(?: ([^ ]+))?', ln)
        if m and not in_usage:   # an option list: "  --ckpt best|last   checkpoint to load"
            add_opt(opts, m.group(1), m.group(2))
    for ln in usage:
        for m in re.finditer(r'(--[a-z][a-z0-9-]*)(?: ([^ \]\[]+))?', ln):
            named = re.findall(r'gflow ([a-z]+)', ln[:m.start()])
            if not named or named[-1] == cmd:   # not another command's option (`gflow sample --recompute`)
                add_opt(opts, m.group(1), m.group(2))
        m = re.match(r'^(?:usage:)?\s*gflow ' + re.escape(cmd) + r'\b(.*)$', ln)
        if not m:
            continue
        for pos, tok in enumerate(m.group(1).split()):
            if tok.startswith(('[', '-', '(')):
                break
            alts = tok.split('|')
            if all(re.match(r'^[a-z][a-z0-9-]*$', a) for a in alts):   # literal words: data fetch bert-base-uncased
                while len(words) <= pos:
                    words.append([])
                words[pos] += [a for a in alts if a not in words[pos]]
            else:
                files.update(file_kind(a) for a in alts)
    kinds = re.search(r'^kinds:\n((?:  .*\n|\s*\n)*)', text, re.M)   # probe KIND
    if kinds and not (words and words[0]):
        words[0:1] = [re.findall(r'^  ([a-z][a-z0-9-]*)  ', kinds.group(1), re.M)]
    return {'opts': opts, 'words': words, 'files': sorted(files - {''})}


def add_opt(opts, name, val):
    """Record option NAME; VAL, the word after it, is its value when it looks like a placeholder."""
    if val is not None and not (PLACEHOLDER.match(val) or '|' in val):
        val = None
    kind = value_kind(val)
    if opts.get(name, '') == '':
        opts[name] = kind


def value_kind(val):
    """'' for a flag, 'choice:a b' for a|b, a file_kind, or 'word' (a number or text: nothing offered)."""
    if val is None:
        return ''
    if '|' in val and all(re.match(r'^[a-z0-9]+$', a) for a in val.split('|')):
        return 'choice:' + ' '.join(val.split('|'))
    k = file_kind(val)
    return k if k else 'word'


def file_kind(ph):
    """What a positional or option placeholder names: 'ini', 'ckpt', 'dir', 'any' (file) or ''."""
    ph = ph.strip('[]().,')
    if ph == 'RECIPE' or ph.endswith('.ini'):
        return 'ini'
    if ph == 'CHECKPOINT':
        return 'ckpt'
    if ph.endswith('DIR') or ph == 'DEST':
        return 'dir'
    if ph == 'FILE' or re.match(r'^[A-Z]+\.[a-z]+$', ph):   # FILE, FILE.png, OUT.safetensors
        return 'any'
    return ''


def roff(text):
    """Help text as roff: backslashes, option dashes, non-ASCII, leading dots escaped."""
    out = []
    for ln in text.rstrip('\n').split('\n'):
        ln = re.sub(r'(?<!\w)-', r'\\-', ln.replace('\\', '\\e'))   # option dashes; a-b stays a hyphen
        ln = ''.join(c if ord(c) < 128 else '\\[u%04X]' % ord(c) for c in ln)
        if ln.startswith(('.', "'")):
            ln = '\\&' + ln
        out.append(ln)
    return '\n'.join(out)


def man_page(version, desc, cmds, exits, helps):
    v = version.splitlines()[0] if version else 'gflow'
    r = [f'.TH GFLOW 1 "" "{roff(v)}" "User Commands"',
         '.SH NAME', 'gflow \\- ' + roff(desc),
         '.SH SYNOPSIS', '.B gflow', '.I command', '[\\fIoptions\\fR]', '.br',
         '.B gflow', '\\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR | \\fIcommand\\fR \\fB\\-\\-help\\fR',
         '.SH DESCRIPTION',
         roff(desc[:1].upper() + desc[1:]) + '. Each command below is followed by the text of',
         '.B gflow', '.I command', '.BR \\-\\-help .',
         '.SH COMMANDS']
    for name, summary in cmds:
        r += ['.TP', '.B ' + name, roff(summary)]
    for name, _ in cmds:
        r += ['.SS gflow ' + name, '.nf', '.RS 4', roff(helps[name]), '.RE', '.fi']
    if exits:
        r += ['.SH EXIT STATUS', roff(exits) + '.']
    r += ['.SH SEE ALSO', 'The README and docs/ of the source tree: recipes (docs/recipe\\-keys.md, or',
          '.BR "gflow info \\-\\-keys" ),', 'the CUDA backend (docs/cuda.md), performance (docs/performance.md).', '']
    return '\n'.join(r)


def completion(cmds, parsed):
    """A bash completion function, self-contained (plain bash; bash-completion not required)."""
    q = lambda s: "'" + s.replace("'", "'\\''") + "'"
    r = ['# bash completion for gflow — generated by tools/gen_cli_docs.py from the help texts; do not edit',
         '_gflow_files() { # _gflow_files KIND CUR: complete files of KIND (ini, ckpt, dir, any) and directories',
         '  local IFS=$\'\\n\'',
         '  compopt -o filenames 2>/dev/null',
         '  case $1 in',
         '    ini) COMPREPLY+=($(compgen -f -X \'!*.ini\' -- "$2") $(compgen -d -- "$2")) ;;',
         '    ckpt) COMPREPLY+=($(compgen -f -X \'!*.ckpt\' -- "$2") $(compgen -d -- "$2")) ;;',
         '    dir) COMPREPLY+=($(compgen -d -- "$2")) ;;',
         '    *) COMPREPLY+=($(compgen -f -- "$2")) ;;',
         '  esac',
         '}',
         '_gflow() {',
         '  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]}',
         '  COMPREPLY=()',
         '  if [ "$COMP_CWORD" = 1 ]; then',
         '    COMPREPLY=($(compgen -W ' + q(' '.join(c for c, _ in cmds) + ' --help --version') + ' -- "$cur"))',
         '    return',
         '  fi',
         '  local opts="" words_at="" files="" i n=0',
         '  case $cmd in']
    for name, _ in cmds:
        p = parsed[name]
        r.append(f'    {name})')
        r.append('      opts=' + q(' '.join(sorted(p['opts'])) + ' --help'))
        r.append('      case $prev in')
        for o, kind in sorted(p['opts'].items()):
            if kind.startswith('choice:'):
                r.append(f'        {o}) COMPREPLY=($(compgen -W {q(kind[7:])} -- "$cur")); return ;;')
            elif kind in ('ini', 'ckpt', 'dir', 'any'):
                r.append(f'        {o}) _gflow_files {kind} "$cur"; return ;;')
            elif kind == 'word':
                r.append(f'        {o}) return ;;')
        r.append('      esac')
        for i, ws in enumerate(p['words']):
            r.append(f'      words_at[{i}]={q(" ".join(ws))}')
        r.append('      files=' + q(' '.join(p['files'])) + ' ;;')
    r += ['    *) return ;;',
          '  esac',
          '  if [[ $cur == -* ]]; then',
          '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
          '    return',
          '  fi',
          '  # the position among the arguments that are not options (an option\'s value is skipped',
          '  # when the option takes one: it is then followed by a word not starting with -)',
          '  for ((i = 2; i < COMP_CWORD; i++)); do',
          '    case ${COMP_WORDS[i]} in',
          '      -*) case " $_gflow_valued " in *" ${cmd}${COMP_WORDS[i]} "*) i=$((i + 1)) ;; esac ;;',
          '      *) n=$((n + 1)) ;;',
          '    esac',
          '  done',
          '  if [ -n "${words_at[n]:-}" ]; then',
          '    COMPREPLY=($(compgen -W "${words_at[n]}" -- "$cur"))',
          '    return',
          '  fi',
          '  local k',
          '  for k in ${files:-any}; do _gflow_files "$k" "$cur"; done',
          '  return 0',
          '}']
    valued = ' '.join(f'{name}{o}' for name, _ in cmds for o, k in sorted(parsed[name]['opts'].items()) if k)
    r.insert(1, '_gflow_valued=' + q(valued) + '   # command+option pairs that take a value')
    r += ['complete -F _gflow gflow', '']
    return '\n'.join(r)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split('\n')[0])
    gflow, man_out, comp_out = sys.argv[1:]
    desc, cmds, exits = parse_top(run(gflow, '--help'))
    version = run(gflow, '--version')
    helps = {c: run(gflow, c, '--help') for c, _ in cmds}
    parsed = {c: parse_command(c, helps[c]) for c, _ in cmds}
    with open(man_out, 'w', encoding='utf-8') as f:
        f.write(man_page(version, desc, cmds, exits, helps))
    with open(comp_out, 'w', encoding='utf-8') as f:
        f.write(completion(cmds, parsed))


if __name__ == '__main__':
    main()
