#!/usr/bin/env python3
"""own_work.py — what share of a `gflow bench` step is gflow's own work, from `perf script` samples
(issue 49: "the non-GEMM time of a step"; tools/own_work.sh records them).

Reads `perf script -F tid,time,ip,sym,dso` text (a file, or - for standard input), keeps the samples
of the last STEPS x MS_PER_STEP milliseconds (the timed steps: `gflow bench` prints nothing after
them but its report) and sorts each by where it ran:
  product   the library's matrix products: oneDNN's JIT kernels named brgemm/matmul/gemm (their
            operand copies included), libdnnl itself, and OpenBLAS (libopenblas, libblas);
  own       everything else: gflow's code, oneDNN's reorders (B rounded into its layout), libc,
            libm, libgomp, the kernel.
With --blas-is-own attention's per-head products count as gflow's own (a bf16 step whose other
products all run on oneDNN: attention's are gflow's own work by the issue's account): OpenBLAS,
and unnamed JIT code, libxsmm's kernels (oneDNN names its JIT kernels when ONEDNN_JIT_PROFILE=2, a
perf map, as own_work.sh sets it; libxsmm's are [unknown] there); without it both count as products.
Prints one line:  own_share S  own_ms M  product_share P  samples N  (and each class's share);
with --top K then the K own symbols with the most samples, a line each:  own_sym MS SHARE SYM (DSO)
(ms a step, share of the step).
Exit 2 on bad arguments, 1 when no sample falls in the window.
"""
import argparse
import re
import sys

LINE = re.compile(r'\s*(\d+)\s+([\d.]+):\s+\S+\s+(.*?)\s+\((.*)\)\s*$')


def classify(sym, dso, blas_is_own):
    if 'libopenblas' in dso or 'libblas' in dso:
        return 'own' if blas_is_own else 'product'
    if 'libdnnl' in dso:
        return 'product'
    if dso.startswith('/tmp/perf-') or dso.startswith('[JIT]'):
        if 'reorder' in sym:
            return 'own'
        if blas_is_own and (sym == '[unknown]' or sym.startswith('0x')):
            return 'own'
        return 'product'
    return 'own'


def main(argv):
    ap = argparse.ArgumentParser(prog='own_work.py', description=__doc__.split('\n\n')[0])
    ap.add_argument('samples', help="perf script output, or - for standard input")
    ap.add_argument('--ms-per-step', type=float, required=True)
    ap.add_argument('--steps', type=int, required=True)
    ap.add_argument('--blas-is-own', action='store_true')
    ap.add_argument('--top', type=int, default=0, metavar='K', help='then the K own symbols with most samples')
    a = ap.parse_args(argv)
    if not a.ms_per_step > 0 or a.steps < 1:
        ap.error('--ms-per-step must be > 0 and --steps >= 1')
    if a.top < 0:
        ap.error('--top must be >= 0')
    f = sys.stdin if a.samples == '-' else open(a.samples, encoding='utf-8', errors='replace')
    rows = []
    for line in f:
        m = LINE.match(line)
        if m:
            rows.append((float(m.group(2)), m.group(3).strip(), m.group(4).strip()))
    if not rows:
        print('own_work.py: no samples in %s' % a.samples, file=sys.stderr)
        return 1
    t1 = max(r[0] for r in rows)
    t0 = t1 - a.steps * a.ms_per_step / 1000.0
    n = {'own': 0, 'product': 0}
    by_sym = {}
    for t, sym, dso in rows:
        if t >= t0:
            c = classify(sym, dso, a.blas_is_own)
            n[c] += 1
            if c == 'own':
                key = (sym, dso)
                by_sym[key] = by_sym.get(key, 0) + 1
    tot = n['own'] + n['product']
    if tot == 0:
        print('own_work.py: no samples in the last %d steps' % a.steps, file=sys.stderr)
        return 1
    own = n['own'] / tot
    print('own_share %.3f  own_ms %.1f  product_share %.3f  samples %d' % (own, own * a.ms_per_step,
                                                                           1 - own, tot))
    for (sym, dso), k in sorted(by_sym.items(), key=lambda kv: (-kv[1], kv[0]))[:a.top]:
        print('own_sym %.1f %.3f %s (%s)' % (k / tot * a.ms_per_step, k / tot, sym, dso))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
