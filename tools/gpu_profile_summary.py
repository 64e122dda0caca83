#!/usr/bin/python3
"""gpu_profile_summary.py — the one summary file of tools/gpu_bench.sh's profile step.

Reads the kernel table of a profiler run of `gflow bench --set run.device=cuda` and that
bench's own output, and writes Markdown: the ten kernels taking most GPU time, the kernel
launches per step (gflow's count, kernel_launches_per_step), and the host's time per step
against the GPU's (bench's host_ms_per_step and event-timed ms_per_step, and the kernels'
busy time per step from the profile).

    gpu_profile_summary.py --tool nsys|ncu --kernels CSV --bench LOG --steps N
        nsys: CSV is `nsys stats --report cuda_gpu_kern_sum --format csv` (columns "Total Time
        (ns)", "Instances", "Name"); ncu: CSV is `ncu --csv --metrics gpu__time_duration.sum`
        (one row per launch: "Kernel Name", "Metric Value", "Metric Unit"), summed per kernel.
        N: the steps the profiled process ran (warm-up, timed and queued), to divide by.

Exit 2 with a message naming the file when a table cannot be read.
"""
import argparse
import csv
import re
import sys

NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def fail(msg):
    print(f"gpu_profile_summary: {msg}", file=sys.stderr)
    sys.exit(2)


def num(s):
    return float(s.replace(",", ""))


def nsys_kernels(path):
    """{name: [total ns, instances]} from nsys's cuda_gpu_kern_sum CSV"""
    with open(path, newline="", encoding="utf-8") as f:
        lines = f.read().splitlines()
    head = next((i for i, l in enumerate(lines) if "Total Time" in l and "Name" in l), None)
    if head is None:
        fail(f"{path}: no cuda_gpu_kern_sum table (no header with Total Time and Name)")
    out = {}
    for n, row in enumerate(csv.DictReader(lines[head:]), head + 2):
        try:
            k = next(c for c in row if c and c.startswith("Total Time"))
            t = out.setdefault(row["Name"], [0.0, 0])
            t[0] += num(row[k])
            t[1] += int(num(row["Instances"]))
        except (KeyError, StopIteration, ValueError, AttributeError):
            fail(f"{path}: line {n}: not a kernel row: {row}")
    return out


def ncu_kernels(path):
    """{name: [total ns, launches]} from ncu's --csv rows of gpu__time_duration.sum"""
    with open(path, newline="", encoding="utf-8") as f:
        lines = f.read().splitlines()
    head = next((i for i, l in enumerate(lines) if '"Kernel Name"' in l and '"Metric Value"' in l), None)
    if head is None:
        fail(f"{path}: no ncu table (no header with Kernel Name and Metric Value)")
    out = {}
    for n, row in enumerate(csv.DictReader(lines[head:]), head + 2):
        if row.get("Metric Name") not in (None, "gpu__time_duration.sum"):
            continue
        unit = NS.get((row.get("Metric Unit") or "ns").strip())
        try:
            v = num(row["Metric Value"])
        except (KeyError, ValueError, AttributeError):
            v = None
        if unit is None or v is None:
            fail(f"{path}: line {n}: no duration in {row.get('Metric Value')!r} {row.get('Metric Unit')!r}")
        t = out.setdefault(row["Kernel Name"], [0.0, 0])
        t[0] += v * unit
        t[1] += 1
    return out


def bench_field(text, key):
    m = re.search(rf"^{key}: ([0-9.eE+-]+)", text, re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", choices=["nsys", "ncu"], required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--steps", type=int, required=True)
    a = ap.parse_args()
    if a.steps < 1:
        fail(f"--steps {a.steps}: the profiled process ran at least one step")
    try:
        ks = (nsys_kernels if a.tool == "nsys" else ncu_kernels)(a.kernels)
        bench = open(a.bench, encoding="utf-8", errors="replace").read()
    except OSError as e:
        fail(f"{e.filename}: {e.strerror}")
    if not ks:
        fail(f"{a.kernels}: no kernel rows")
    total = sum(t for t, _ in ks.values())
    top = sorted(ks.items(), key=lambda kv: -kv[1][0])[:10]
    print(f"# GPU profile ({a.tool}) of `gflow bench`, {a.steps} steps in the process\n")
    print("| kernel | GPU time % | total ms | launches | µs each |")
    print("|---|---|---|---|---|")
    for name, (t, n) in top:
        short = name if len(name) <= 90 else name[:87] + "..."
        print(f"| `{short.replace('|', '/')}` | {100 * t / total:.1f} | {t / 1e6:.3f} | {n} | {t / 1e3 / max(n, 1):.1f} |")
    launches = sum(n for _, n in ks.values())
    kl = re.search(r"^kernel_launches_per_step: .*$", bench, re.M)
    host, gpu = bench_field(bench, "host_ms_per_step"), bench_field(bench, "ms_per_step")
    busy = total / 1e6 / a.steps
    print()
    print(f"- kernels in the profile: {len(ks)} distinct, {launches} launches, {launches / a.steps:.1f} a step")
    print(f"- {kl.group(0) if kl else 'kernel_launches_per_step: not in the bench output'}")
    print(f"- GPU busy in kernels: {busy:.3f} ms a step (Σ kernel time / {a.steps} steps)")
    print(f"- host_ms_per_step: {host if host is not None else '?'}; ms_per_step (CUDA events): "
          f"{gpu if gpu is not None else '?'}" +
          (f"; kernels fill {100 * busy / gpu:.0f}% of the step, the host's share is {100 * host / gpu:.0f}%"
           if host and gpu else ""))


if __name__ == "__main__":
    main()
