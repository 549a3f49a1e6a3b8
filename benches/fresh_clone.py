#!/usr/bin/env python3
"""The CI case: a fresh `git clone` per run, with the cache of an earlier run restored.

Usage: python3 benches/fresh_clone.py [--runs N] [--modules N] [--rows A,B,..] [BINARY]
  BINARY defaults to target/release/terraci; --modules to 10000; --runs to 9; --rows to
  every row below (`cold` is always run: the ratios are to it).

The workload (made here, once, into /tmp/terraci-fresh-clone/origin): N modules in the
default `{service}/{environment}/{region}/{module}` layout, three files each (a backend,
a remote state read of a neighbour's state, variables), committed on `main`, and a
`feature` branch with one module's file changed in a second commit.

Then, once: a fresh clone of `main`, a full `generate` in it (this writes the caches: the
"run on the base commit" a CI cache restores), and its `.terraci/cache` kept aside.

Timed, interleaved, each in a fresh `git clone` at the same path (CI clones into the same
directory every time; the run record's key holds the working directory):
  cold      `generate` on main with `--no-cache`
  full      `generate` on main, the kept cache copied in
  changed   `generate --changed-only --base-ref main` on `feature`, the kept cache
            copied in (its record is of another command line: facts and summaries only)
  committed the same with `--committed-only` (what the GitHub workflow's
            `terraci-affected` job runs: a CI checkout has no uncommitted change, and git's
            status of the work tree is not asked)
  commit-full, commit-changed
            `full` and `changed` with `--from-commit` (the project read from HEAD's
            commit, not the work tree), the cache of a `generate --from-commit` on main
            restored
Clone and copy are not timed. Prints the medians, the ratios to the cold run, and the
command lines.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
WORK = "/tmp/terraci-fresh-clone"
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com",
       "-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"]


def generate_workload(dest, n):
    """N modules, three files each, with a dependency on a neighbour's state; their
    paths."""
    services = ["svc%02d" % i for i in range(10)]
    envs = ["dev", "stage", "prod", "qa"]
    regions = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1"]
    per_leaf = max(1, n // (len(services) * len(envs) * len(regions)))
    os.makedirs(dest)
    with open(os.path.join(dest, ".terraci.yaml"), "w") as f:
        f.write('structure:\n  pattern: "{service}/{environment}/{region}/{module}"\n')
    made = []
    for s in services:
        for e in envs:
            for r in regions:
                for m in range(per_leaf):
                    if len(made) == n:
                        return made
                    rel = f"{s}/{e}/{r}/mod{m:03d}"
                    made.append(rel)
                    d = os.path.join(dest, rel)
                    os.makedirs(d)
                    with open(os.path.join(d, "backend.tf"), "w") as f:
                        f.write('terraform {\n  backend "s3" {\n    bucket = "state"\n'
                                f'    key    = "{rel}/terraform.tfstate"\n  }}\n}}\n')
                    dep = f"{s}/{e}/{r}/mod{m - 1:03d}" if m else None
                    with open(os.path.join(d, "main.tf"), "w") as f:
                        f.write(f'locals {{\n  name = "{s}-{e}-{m}"\n  region = var.region\n}}\n')
                        if dep:
                            f.write('data "terraform_remote_state" "dep" {\n  backend = "s3"\n'
                                    '  config = {\n    bucket = "state"\n'
                                    f'    key    = "{dep}/terraform.tfstate"\n  }}\n}}\n')
                    with open(os.path.join(d, "variables.tf"), "w") as f:
                        f.write('variable "region" {\n  type    = string\n'
                                f'  default = "{r}"\n}}\n')
    return made


def git(*args, cwd):
    subprocess.run(GIT + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def origin(n):
    repo = os.path.join(WORK, f"origin{n}")
    done = os.path.join(repo, ".git", "fresh-clone-complete")
    if os.path.exists(done):
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    modules = generate_workload(repo, n)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "base", cwd=repo)
    git("checkout", "-q", "-b", "feature", cwd=repo)
    path = os.path.join(repo, modules[len(modules) // 3], "main.tf")
    with open(path, "a") as f:
        f.write("# widened\n")
    git("commit", "-q", "-am", "one module changed", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    open(done, "w").close()
    return repo


def fresh_clone(repo, branch, cache):
    """A fresh clone of `branch` at the one clone path, with `cache` copied in."""
    dest = os.path.join(WORK, "clone")
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(GIT + ["clone", "-q", "--no-hardlinks", "-b", branch, repo, dest],
                   check=True, stdout=subprocess.DEVNULL)
    # The base ref a CI job fetches (GitLab: the target branch; here: origin's main).
    git("branch", "-q", "main", "origin/main", cwd=dest) if branch != "main" else None
    if cache:
        shutil.copytree(cache, os.path.join(dest, ".terraci", "cache"))
    # A push arrives minutes after its checkout is written; let the files settle, and
    # write the clone out first, so the disk's writeback of 30,000 new files does not
    # land in the timed run.
    os.sync()
    time.sleep(0.2)
    return dest


def timed(cmd, cwd):
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t) * 1000
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.decode()}")
    return ms


def main():
    args = sys.argv[1:]
    runs, n, only = 9, 10000, None
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--runs":
            runs = int(args.pop(0))
        elif flag == "--modules":
            n = int(args.pop(0))
        elif flag == "--rows":
            only = set(args.pop(0).split(",")) | {"cold"}
        else:
            sys.exit(__doc__)
    binary = os.path.abspath(args[0] if args else os.path.join(ROOT, "target", "release", "terraci"))
    os.makedirs(WORK, exist_ok=True)
    repo = origin(n)
    out = os.path.join(WORK, "out.yml")
    generate = [binary, "generate", "-o", out, "--force"]
    changed = generate + ["--changed-only", "--base-ref", "main"]
    # The run on the base commit whose cache CI restores.
    base = fresh_clone(repo, "main", None)
    timed(generate, base)
    kept = os.path.join(WORK, "kept-cache")
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(os.path.join(base, ".terraci", "cache"), kept)
    # The same base run with --from-commit, for the --from-commit rows.
    base = fresh_clone(repo, "main", None)
    timed(generate + ["--from-commit"], base)
    kept_commit = os.path.join(WORK, "kept-cache-commit")
    shutil.rmtree(kept_commit, ignore_errors=True)
    shutil.copytree(os.path.join(base, ".terraci", "cache"), kept_commit)
    labels = ["cold", "full", "cold-changed", "changed", "committed", "commit-full",
              "commit-changed"]
    if only is not None:
        unknown = only - set(labels)
        if unknown:
            sys.exit(f"unknown rows: {', '.join(sorted(unknown))}; rows: {', '.join(labels)}")
        labels = [label for label in labels if label in only]
    rows = {label: [] for label in labels}
    for _ in range(runs):
        for label, branch, cache, cmd in [
            ("cold", "main", None, generate + ["--no-cache"]),
            ("full", "main", kept, generate),
            ("cold-changed", "feature", None, changed + ["--no-cache"]),
            ("changed", "feature", kept, changed),
            ("committed", "feature", kept, changed + ["--committed-only"]),
            ("commit-full", "main", kept_commit, generate + ["--from-commit"]),
            ("commit-changed", "feature", kept_commit, changed + ["--from-commit"]),
        ]:
            if label not in labels:
                continue
            dest = fresh_clone(repo, branch, cache)
            rows[label].append(timed(cmd, dest))
    cold = statistics.median(rows["cold"])
    print(f"{n} modules, {runs} fresh clones per row, interleaved; binary {binary}")
    for label in labels:
        med = statistics.median(rows[label])
        print(f"  {label:<13} median {med:7.1f} ms  {med / cold:5.2f}x cold  "
              f"(min {min(rows[label]):.1f}, max {max(rows[label]):.1f})")
    print("commands: cold = `generate -o OUT --force --no-cache` on main; full = "
          "`generate -o OUT --force` on main with the cache restored; changed = "
          "`generate -o OUT --force --changed-only --base-ref main` on feature with the "
          "cache restored (cold-changed: the same with --no-cache; committed: with "
          "--committed-only); commit-full and commit-changed: full and changed with "
          "--from-commit and the cache of `generate -o OUT --force --from-commit` on main")


if __name__ == "__main__":
    main()
