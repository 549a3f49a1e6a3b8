#!/usr/bin/env python3
"""Whole-process figures for the README's performance tables (spec §11).

Usage: python3 benches/measure.py [--ab OLD_BINARY] [--runs N] [--variant] [BINARY] [SIZES...]
  BINARY defaults to target/release/terraci; SIZES to 200 2000 10000.
  --ab OLD_BINARY: every figure is taken from interleaved runs of both binaries (old,
    new, old, new, ...) and printed as `new / old`: on a shared machine only interleaved
    runs compare.
  --runs N: runs per median (default 15 below 10,000 modules, 9 at 10,000).
  --variant: the workload of benches/gen_variant.py (module calls, workspace keys,
    library modules) instead of the standard one.
Workloads are generated once into /tmp/terraci-measure/ by ../shared/bench/gen_monorepo.py.

Per size it prints, for every command (generate, generate --dry-run, validate, graph in
dot and json, graph --stats, graph -m --dependents, local-exec plan --dry-run): the median
wall time of a cold run (--no-cache), of a warm run (replayed from the run record) and
the peak RSS of a cold run (/usr/bin/time %M); for generate also a cold run that writes
both caches and a run with the fact cache only (times and peak RSS; run.bin removed first: what a run after
an edit costs). Then the read floor: `cargo bench --bench read_floor` (walk and read every
file on all cores, in process) and `find | xargs cat`, and cold generate over the floor.

Then, per size, the merge-request rows (changed_only_rows): the workload committed to a
git repository on `main`, a `feature` branch with one changed file committed, and the
median wall time of: a cold `generate --no-cache`, a cold `generate --changed-only
--base-ref main --no-cache`, a repeat of it with the caches present (same tree, same
base: replayed), and a repeat after editing one more file before each run (the edit
left to settle, untimed, as a push comes minutes after its edit). Set
MEASURE_ROWS=changed for these rows only, MEASURE_ROWS=main for the first table only.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_monorepo.py")

args = sys.argv[1:]
old = None
runs_override = None
variant = False
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag == "--ab":
        old = args.pop(0)
    elif flag == "--runs":
        runs_override = int(args.pop(0))
    elif flag == "--variant":
        variant = True
    else:
        sys.exit(__doc__)
binary = args[0] if args else os.path.join(ROOT, "target", "release", "terraci")
sizes = [int(a) for a in args[1:]] or [200, 2000, 10000]
binaries = [binary] + ([old] if old else [])


def run(cmd):
    started = time.perf_counter()
    result = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}")
    return elapsed


def medians(runs, make_cmd, prepare=None):
    """Median ms per binary, runs interleaved; without `prepare` one warm-up run each."""
    if prepare is None:
        for b in binaries:
            run(make_cmd(b))
    times = {b: [] for b in binaries}
    for _ in range(runs):
        for b in binaries:
            if prepare:
                prepare(b)
            times[b].append(run(make_cmd(b)))
    return [statistics.median(times[b]) * 1000 for b in binaries]


def peak_rss_mb(cmd):
    result = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    return int(result.stderr.strip().splitlines()[-1]) / 1024


def show(values, unit, fmt="{:.1f}"):
    return " / ".join(fmt.format(v) for v in values) + f" {unit}"


def workload(n):
    name = f"v{n}" if variant else f"m{n}"
    path = f"/tmp/terraci-measure/{name}"
    if not os.path.exists(os.path.join(path, ".complete")):
        shutil.rmtree(path, ignore_errors=True)
        if variant:
            gen = ["python3", os.path.join(HERE, "gen_variant.py"), path, str(n)]
        else:
            gen = ["python3", GEN, path, str(n)]
        subprocess.run(gen, check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(path, ".complete"), "w").close()
        time.sleep(0.2)  # let the files settle: runs record only settled files
    return path


def read_floor_ms(path, runs):
    done = subprocess.run(["cargo", "bench", "-q", "--bench", "read_floor", "--", path, str(runs)],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"cargo bench --bench read_floor failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[0])


COMMANDS = [
    ("generate", lambda n, out: ["generate", "-o", out, "--force"]),
    ("generate --dry-run", lambda n, out: ["generate", "--dry-run"]),
    ("validate", lambda n, out: ["validate"]),
    ("graph (dot)", lambda n, out: ["graph"]),
    ("graph --format json", lambda n, out: ["graph", "--format", "json"]),
    ("graph --stats", lambda n, out: ["graph", "--stats"]),
    ("graph -m --dependents", lambda n, out: ["graph", "-m", "platform/dev/eu-central-1/vpc", "--dependents"]),
    ("local-exec plan --dry-run", lambda n, out: ["local-exec", "plan", "--dry-run"]),
]


def median_ms(runs, cmd, prepare=None):
    if prepare is None:
        run(cmd)  # warm-up
    times = []
    for _ in range(runs):
        if prepare:
            prepare()
        times.append(run(cmd))
    return statistics.median(times) * 1000


def changed_only_rows(n):
    """`--changed-only` on a merge request: cold, repeat (replayed), repeat after an edit."""
    source = workload(n)
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
    # --force: from 2,000 modules the whole pipeline is over GitLab's default size limit.
    generate = [binary, "generate", "-d", repo, "-o", out, "--force"]
    changed = generate + ["--changed-only", "--base-ref", "main"]
    cache = os.path.join(repo, ".terraci")
    edits = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(repo) if ".git" not in d for f in fs
        if f == "main.tf")[:runs + 1]
    edited = iter(edits)

    def edit_one_more():
        with open(next(edited), "a") as f:
            f.write("# one more edit\n")
        # A push comes minutes after its edit: the edited file settles before the run
        # (a run records only settled files, and one with an unsettled file would send
        # the next run down git's whole status; not timed).
        time.sleep(0.2)

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

if old:
    print(f"figures: {binary} / {old} (interleaved)")
print("| modules | command | cold (--no-cache) | warm (replay) | peak RSS, cold |")
print("|--------:|---------|------:|------:|------:|")
for n in sizes if rows != "changed" else []:
    path = workload(n)
    runs = runs_override or (15 if n < 10000 else 9)
    outs = {b: f"/tmp/terraci-measure/out{n}-{i}.yml" for i, b in enumerate(binaries)}
    # A cache dir per binary: one build's records are foreign files to another's check.
    caches = {b: f"/tmp/terraci-measure/cache{n}-{i}" for i, b in enumerate(binaries)}

    def drop_caches(b):
        shutil.rmtree(caches[b], ignore_errors=True)

    def drop_record(b):
        record = os.path.join(caches[b], "run.bin")
        if os.path.exists(record):
            os.remove(record)

    cold_generate = None
    for label, make in COMMANDS:
        def cmd(b, extra=()):
            return [b, "--cache-dir", caches[b], *extra, "-d", path, *make(n, outs[b])]
        cold = medians(runs, lambda b: cmd(b, ["--no-cache"]))
        warm = medians(runs, cmd)
        rss = [peak_rss_mb(cmd(b, ["--no-cache"])) for b in binaries]
        if label == "generate":
            cold_generate = cold
        print(f"| {n:>6,} | `{label}` | {show(cold, 'ms')} | {show(warm, 'ms')} | {show(rss, 'MB', '{:.0f}')} |",
              flush=True)
    gen = lambda b: [b, "--cache-dir", caches[b], "-d", path, "generate", "-o", outs[b]]
    writing = medians(runs, gen, drop_caches)
    for b in binaries:
        run(gen(b))
    fact_cache = medians(runs, gen, drop_record)
    for b in binaries:
        drop_caches(b)
    rss = [peak_rss_mb(gen(b)) for b in binaries]
    for b in binaries:
        drop_record(b)
    rss_facts = [peak_rss_mb(gen(b)) for b in binaries]
    print(f"| {n:>6,} | `generate`, cold writing caches | {show(writing, 'ms')} | fact cache only: "
          f"{show(fact_cache, 'ms')} | {show(rss, 'MB', '{:.0f}')}; fact cache only: "
          f"{show(rss_facts, 'MB', '{:.0f}')} |", flush=True)
    floor = read_floor_ms(path, runs)
    cat = medians(runs, lambda _b: ["sh", "-c", f"find {path} -type f -not -path '*/.terraci/*' | xargs cat > /dev/null"])[0]
    ratios = [c / floor for c in cold_generate]
    print(f"| {n:>6,} | read floor (Rust walk+read) | {floor:.1f} ms | `find \\| xargs cat`: {cat:.1f} ms "
          f"| cold generate / floor: {show(ratios, '', '{:.2f}').strip()} |", flush=True)

if rows != "main":
    print("\n| modules | cold `generate` | cold `--changed-only` | repeat | after one more edit |")
    print("|--------:|------:|------:|------:|------:|")
for n in sizes if rows != "main" else []:
    changed_only_rows(n)
