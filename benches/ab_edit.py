#!/usr/bin/env python3
"""Interleaved A/B of a merge-request run after one more edit (issue 23's hardest row).

    python3 benches/ab_edit.py [--runs N] [--size N] BINARY [OTHER_BINARY]

Each binary gets a copy of its own of the git workload `benches/measure.py` makes
(`/tmp/terraci-measure/git<N>`: the standard workload committed on `main`, one changed
file committed on `feature`), so the two never read each other's caches. A round, for
each binary in turn: append a line to one more `main.tf`, let it settle (a push comes
minutes after the edit; a run records only settled files), then time
`generate --changed-only --base-ref main` with the caches of the binary's last run.
After the rounds, cold `generate --no-cache` and cold `generate --changed-only
--no-cache` are timed, alternating, the same way, for the ratios. Prints medians (ms)
and their ratios to cold `generate`.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GIT = ["git", "-c", "user.name=m", "-c", "user.email=m@example.com", "-c", "commit.gpgsign=false"]


def args():
    argv = sys.argv[1:]
    runs, size = 7, 10000
    while argv and argv[0].startswith("--"):
        flag, value = argv[0], int(argv[1])
        argv = argv[2:]
        if flag == "--runs":
            runs = value
        elif flag == "--size":
            size = value
        else:
            sys.exit(f"unknown flag {flag}")
    if not argv:
        sys.exit(__doc__)
    return runs, size, [os.path.abspath(b) for b in argv]


def workload(size):
    """The git workload of `measure.py`, made by it if missing."""
    repo = f"/tmp/terraci-measure/git{size}"
    if not os.path.exists(os.path.join(repo, ".git", "terraci-measure-complete")):
        sys.exit(f"{repo} is missing: make it with `MEASURE_ROWS=changed python3 "
                 f"{HERE}/measure.py BINARY {size}` first")
    return repo


def copy_for(repo, index):
    dest = f"{repo}-ab{index}"
    if not os.path.exists(os.path.join(dest, ".git", "terraci-measure-complete")):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(repo, dest, symlinks=True,
                        ignore=shutil.ignore_patterns(".terraci"))
    subprocess.run(GIT + ["checkout", "-q", "--", "."], cwd=dest, check=True)
    shutil.rmtree(os.path.join(dest, ".terraci"), ignore_errors=True)
    return dest


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    runs, size, binaries = args()
    repo = workload(size)
    repos = [copy_for(repo, i) for i in range(len(binaries))]
    edits = []
    for r in repos:
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(r) if ".git" not in d
                       for f in fs if f == "main.tf")
        edits.append(iter(files[: runs + 2]))

    def changed(i):
        return [binaries[i], "generate", "-d", repos[i], "-o", f"{repos[i]}.out.yml",
                "--changed-only", "--base-ref", "main", "--force"]

    for i in range(len(binaries)):  # warm: the record and both caches
        timed(changed(i))
        time.sleep(0.2)
        timed(changed(i))
    after = [[] for _ in binaries]
    for _ in range(runs):
        for i in range(len(binaries)):
            with open(next(edits[i]), "a") as f:
                f.write("# one more edit\n")
            time.sleep(0.2)
            after[i].append(timed(changed(i)))
    cold = [[] for _ in binaries]
    cold_changed = [[] for _ in binaries]
    for _ in range(runs):
        for i, b in enumerate(binaries):
            cold[i].append(timed([b, "generate", "-d", repos[i], "-o", f"{repos[i]}.cold.yml",
                                  "--no-cache", "--force"]))
            cold_changed[i].append(timed(changed(i) + ["--no-cache"]))
    for i, b in enumerate(binaries):
        a, c = statistics.median(after[i]) * 1000, statistics.median(cold[i]) * 1000
        cc = statistics.median(cold_changed[i]) * 1000
        print(f"{b}: after one more edit {a:.0f} ms, cold generate --no-cache {c:.0f} ms, "
              f"ratio {a / c:.2f}x; cold --changed-only --no-cache {cc:.0f} ms ({cc / c:.2f}x) "
              f"(after-edit runs {', '.join(f'{t * 1000:.0f}' for t in after[i])})")
    for r in repos:
        subprocess.run(GIT + ["checkout", "-q", "--", "."], cwd=r, check=True)


main()
