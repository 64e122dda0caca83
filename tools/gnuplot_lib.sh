# tools/gnuplot_lib.sh — sourced by the tools that draw with gnuplot (plot_runs.sh, plot_valid.sh,
# plot_generation.sh, scaling.sh): no path or name from the command line reaches a shell or a
# gnuplot command string, and a PNG is written whole or not at all (issue 35), as gflow's own
# plots are (src/train/rundir.c, gf_gnuplot).

# gp_quote STR: STR as a gnuplot single-quoted string. gnuplot substitutes nothing inside single
# quotes (no `...`, no @macro); '' is a quote; a line break would end the command, so control
# characters become spaces.
gp_quote() {
  local s
  s=$(printf '%s' "$1" | tr '\001-\037\177' ' ')
  printf "'%s'" "${s//\'/\'\'}"
}

# gp_block NAME < numbers: an inline datablock $NAME of the whitespace-separated numbers on stdin
# (each field forced to a number: no text of a file reaches the script, an "EOD" cannot end it).
gp_block() {
  printf '$%s << EOD\n' "$1"
  awk '{ for (i = 1; i <= NF; i++) printf "%s%.9g", (i > 1 ? " " : ""), $i + 0; printf "\n" }'
  printf 'EOD\n'
}

# gp_metrics_check FILE: FILE is a gflow metrics table, checked as gflow compare checks it
# (src/train/rundir.c, gf_run_metrics_scan): the header, then rows of step and epoch (counts),
# split (train, valid, test) and numbers or "-", 5 to 9 fields; a last line without its newline
# (a run still writing) is left out. Otherwise one line naming FILE:LINE, status 1.
gp_metrics_check() {
  [ -f "$1" ] || { echo "$1: no such file (not a run directory?)" >&2; return 1; }
  head -n "$(wc -l < "$1")" -- "$1" | awk -F'\t' -v f="$1" '
    function bad(why) { printf "%s:%d: %s\n", f, NR, why > "/dev/stderr"; exit 1 }
    BEGIN { split("step epoch split loss ppl ppl_word acc lr gnorm", name, " ") }
    NR == 1 { if ($0 !~ /^step\tepoch\tsplit\t/) bad("not a gflow metrics table (its header starts step<TAB>epoch<TAB>split)"); next }
    {
      if (NF < 5 || NF > 9) bad("expected 5 to 9 tab-separated fields")
      if ($1 !~ /^[0-9]+$/) bad("step is not a count")
      if ($2 !~ /^[0-9]+$/) bad("epoch is not a count")
      if ($3 != "train" && $3 != "valid" && $3 != "test") bad("split is not train, valid or test")
      for (i = 4; i <= NF; i++)
        if ($i != "-" && $i !~ /^[-+]?(inf|nan|[0-9]*[.]?[0-9]+([eE][-+]?[0-9]+)?)$/) bad(name[i] " is not a number or -")
    }'
}

# gp_png OUT: gnuplot reads its script (which must not `set output`) on stdin and writes the PNG
# on its stdout, to a new file next to OUT (mktemp: created exclusively, never through a link).
# OUT is replaced only when gnuplot exits 0 and the PNG ends with its IEND chunk; an OUT that
# exists and is not a regular file (a device, a pipe) is refused.
gp_png() {
  local out=$1 tmp
  if [ -e "$out" ] && [ ! -f "$out" ]; then
    echo "$out exists and is not a regular file: refusing to replace it" >&2
    return 1
  fi
  tmp=$(mktemp "$out.tmp.XXXXXX") || return 1
  if gnuplot > "$tmp" && [ "$(tail -c 8 "$tmp" | od -An -tx1 | tr -d ' \n')" = 49454e44ae426082 ]; then
    mv -f -- "$tmp" "$out"
  else
    rm -f -- "$tmp"
    echo "$out: gnuplot failed or the PNG is incomplete (a full disk?); $out is unchanged" >&2
    return 1
  fi
}
