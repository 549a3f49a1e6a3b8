#!/usr/bin/env python3
"""Whole-process figures for the README's performance table (spec §11).

Usage: python3 benches/measure.py [BINARY] [SIZES...]
  BINARY defaults to target/release/terraci; SIZES to 200 2000 10000.
Workloads are generated once into /tmp/terraci-measure/mN by
../shared/bench/gen_monorepo.py. Prints, per size, the median wall time of: a cold run
without caches (--no-cache), a cold run that writes both caches (.terraci removed before
each run), a warm run (replayed), a warm run with the fact cache only (run.bin removed
before each run), reading every file (find | xargs cat), and the peak RSS of a cold run.

Then, per size, the merge-request rows (changed_only_rows): the workload committed to a
git repository on `main`, a `feature` branch with one changed file committed, and the
median wall time of: a cold `generate --no-cache`, a cold `generate --changed-only
--base-ref main --no-cache`, a repeat of it with the caches present (same tree, same
base: replayed), and a repeat after editing one more file before each run. Set
MEASURE_ROWS=changed for these rows only, MEASURE_ROWS=main for the first table only.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "..", "shared", "bench", "gen_monorepo.py")
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "target", "release", "terraci")
sizes = [int(a) for a in sys.argv[2:]] or [200, 2000, 10000]


def run(cmd):
    started = time.perf_counter()
    result = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return elapsed


def median_ms(runs, cmd, prepare=None):
    if prepare is None:
        run(cmd)  # warm-up
    times = []
    for _ in range(runs):
        if prepare:
            prepare()
        times.append(run(cmd))
    return statistics.median(times) * 1000


def peak_rss_mb(cmd):
    result = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    return int(result.stderr.strip().splitlines()[-1]) / 1024


def workload_of(n):
    workload = f"/tmp/terraci-measure/m{n}"
    if not os.path.exists(os.path.join(workload, ".complete")):
        shutil.rmtree(workload, ignore_errors=True)
        subprocess.run(["python3", GEN, workload, str(n)], check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(workload, ".complete"), "w").close()
        time.sleep(0.2)  # let the files settle: runs record only settled files
    return workload


def changed_only_rows(n):
    """`--changed-only` on a merge request: cold, repeat (replayed), repeat after an edit."""
    source = workload_of(n)
    repo = f"/tmp/terraci-measure/git{n}"
    git = ["git", "-c", "user.name=m", "-c", "user.email=m@example.com", "-c", "commit.gpgsign=false"]
    marker = os.path.join(repo, ".git", "terraci-measure-complete")
    if not os.path.exists(marker):
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".terraci", ".complete"))
        for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"],
                    ["checkout", "-q", "-b", "feature"]):
            subprocess.run(git + cmd, cwd=repo, check=True)
        files = sorted(
            os.path.join(d, f) for d, _, fs in os.walk(repo) if ".git" not in d for f in fs
            if f == "main.tf")
        with open(files[len(files) // 2], "a") as f:
            f.write("# the merge request's change\n")
        subprocess.run(git + ["commit", "-q", "-am", "change"], cwd=repo, check=True)
        open(marker, "w").close()
        time.sleep(0.2)
    runs = 15 if n < 10000 else 9
    out = f"/tmp/terraci-measure/out-changed{n}.yml"
    generate = [binary, "generate", "-d", repo, "-o", out]
    changed = generate + ["--changed-only", "--base-ref", "main"]
    cache = os.path.join(repo, ".terraci")
    edits = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(repo) if ".git" not in d for f in fs
        if f == "main.tf")[:runs + 1]
    edited = iter(edits)

    def edit_one_more():
        with open(next(edited), "a") as f:
            f.write("# one more edit\n")

    shutil.rmtree(cache, ignore_errors=True)
    cold = median_ms(runs, generate + ["--no-cache"])
    cold_changed = median_ms(runs, changed + ["--no-cache"])
    run(changed)
    time.sleep(0.1)  # the record holds only files that had settled
    run(changed)
    repeat = median_ms(runs, changed)
    after_edit = median_ms(runs, changed, edit_one_more)
    subprocess.run(git + ["checkout", "-q", "--", "."], cwd=repo, check=True)
    print(f"| {n:>6,} | {cold:.0f} ms | {cold_changed:.0f} ms ({cold_changed / cold:.2f}x) "
          f"| {repeat:.0f} ms ({repeat / cold:.2f}x) | {after_edit:.0f} ms ({after_edit / cold:.2f}x) |",
          flush=True)


rows = os.environ.get("MEASURE_ROWS", "all")
for n in sizes if rows != "changed" else []:
    workload = f"/tmp/terraci-measure/m{n}"
    if not os.path.exists(os.path.join(workload, ".complete")):
        shutil.rmtree(workload, ignore_errors=True)
        subprocess.run(["python3", GEN, workload, str(n)], check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(workload, ".complete"), "w").close()
        time.sleep(0.2)  # let the files settle: runs record only settled files
    cache = os.path.join(workload, ".terraci")
    record = os.path.join(cache, "cache", "run.bin")
    runs = 15 if n < 10000 else 9
    generate = [binary, "generate", "-d", workload, "-o", f"/tmp/terraci-measure/out{n}.yml"]

    def drop_caches():
        shutil.rmtree(cache, ignore_errors=True)

    def drop_record():
        if os.path.exists(record):
            os.remove(record)

    no_cache = median_ms(runs, generate + ["--no-cache"])
    cold = median_ms(runs, generate, drop_caches)
    run(generate)
    run(generate)
    warm = median_ms(runs, generate)
    fact_cache = median_ms(runs, generate, drop_record)
    read_all = median_ms(runs, ["sh", "-c", f"find {workload} -type f -not -path '*/.terraci/*' | xargs cat > /dev/null"])
    drop_caches()
    rss = peak_rss_mb(generate)
    print(f"| {n:>6,} | {no_cache:.1f} ms | {cold:.1f} ms | {warm:.1f} ms | {fact_cache:.1f} ms "
          f"| {read_all:.1f} ms | {no_cache / read_all:.2f} | {rss:.0f} MB |", flush=True)

if rows != "main":
    print("\n| modules | cold `--no-cache` | cold `--changed-only` | repeat `--changed-only` | after one more edit |")
    print("|--------:|------:|------:|------:|------:|")
    for n in sizes:
        changed_only_rows(n)
