#!/usr/bin/env python3
"""`terraci watch` after one-file edits, whole process (README performance section).

Usage: python3 benches/watch.py [BINARY] [N]
  BINARY defaults to target/release/terraci, N (modules) to 10000.
Copies the standard workload of N modules (generated with ../shared/bench/gen_monorepo.py
into /tmp/terraci-measure/mN if missing) to a scratch directory, starts `watch -o`, then
rewrites one module's main.tf 16 times, adding and removing a terraform_remote_state
edge, and times each save until the output file's modification time moves. Prints the
median of those times and the median of the work times watch reports (`in N ms`).
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "..", "shared", "bench", "gen_monorepo.py")
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "target", "release", "terraci")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000

source = f"/tmp/terraci-measure/m{n}"
if not os.path.exists(os.path.join(source, ".complete")):
    shutil.rmtree(source, ignore_errors=True)
    subprocess.run(["python3", GEN, source, str(n)], check=True, stdout=subprocess.DEVNULL)
    open(os.path.join(source, ".complete"), "w").close()
scratch = tempfile.mkdtemp(prefix="terraci-watch-")
root = os.path.join(scratch, "repo")
shutil.copytree(source, root, ignore=shutil.ignore_patterns(".terraci"))
out = os.path.join(scratch, "pipeline.yml")
log_path = os.path.join(scratch, "watch.log")

with open(log_path, "w") as log:
    # --force: the whole pipeline is over GitLab's default size limit.
    watch = subprocess.Popen([binary, "watch", "-d", root, "-o", out, "--force"], stderr=log)
    while not os.path.exists(out):
        time.sleep(0.01)
    time.sleep(1.0)
    modules = sorted(os.path.relpath(d, root) for d, _, files in os.walk(root)
                     if "main.tf" in files and ".terraci" not in d)
    # The last module reads the first: no cycle.
    edited = os.path.join(root, modules[-1], "main.tf")
    target_main = open(os.path.join(root, modules[0], "main.tf")).read()
    key = next(l for l in target_main.splitlines() if l.strip().startswith("key")).split('"')[1]
    original = open(edited).read()
    with_edge = original + (
        '\ndata "terraform_remote_state" "bench_edit" {\n  backend = "s3"\n  config = {\n'
        f'    bucket = "acme-terraform-state"\n    key    = "{key}"\n'
        '    region = "eu-central-1"\n  }\n}\n')

    def save(text):
        before = os.stat(out).st_mtime_ns
        started = time.perf_counter()
        with open(edited, "w") as f:
            f.write(text)
        while os.stat(out).st_mtime_ns == before:
            if time.perf_counter() - started > 10:
                sys.exit("the output was not rewritten within 10 s")
            time.sleep(0.001)
        return time.perf_counter() - started

    saves = []
    for _ in range(8):
        saves.append(save(with_edge))
        time.sleep(0.3)
        saves.append(save(original))
        time.sleep(0.3)
    watch.send_signal(signal.SIGINT)
    watch.wait()

lines = [l for l in open(log_path) if " changed -> " in l]
work = [int(m.group(1)) for l in lines if (m := re.search(r" in (\d+) ms$", l.strip()))]
print(f"{n} modules: save to rewritten file median {statistics.median(saves) * 1000:.1f} ms, "
      f"work median {statistics.median(work)} ms (first edit of the file {work[0]} ms), "
      f"{len(saves)} saves")
shutil.rmtree(scratch, ignore_errors=True)
