#!/usr/bin/env python3
"""The standard workload with the real-monorepo features in use, to measure their cost.

Usage: python3 benches/gen_variant.py OUT_DIR N_MODULES

Writes the standard workload (../shared/bench/gen_monorepo.py, or $TERRACI_BENCH_GEN),
then:
- a library module `modules/vpc-state` whose `terraform_remote_state` reads the state
  key it is given (`var.key`) in the reader's workspace (`terraform.workspace`);
- in every module but its group's first (`vpc`), a call of that library with the key of
  its group's `vpc` built from the caller's locals (evaluated per call);
- `workspace_key_prefix` in every backend block, so identities and keys are matched
  through workspace layouts;
- `.terraci.yaml` naming `modules` a library directory.
Every call points at a module that exists, so the graph keeps a dependency per call.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.environ.get("TERRACI_BENCH_GEN") or os.path.join(HERE, "..", "..", "shared", "bench", "gen_monorepo.py")

LIBRARY = '''variable "key" {
  type = string
}

data "terraform_remote_state" "vpc" {
  backend   = "s3"
  workspace = terraform.workspace
  config = {
    bucket = "acme-terraform-state"
    key    = var.key
    region = "eu-central-1"
  }
}

output "vpc_id" {
  value = data.terraform_remote_state.vpc.outputs.id
}
'''

CALL = '''
module "vpc_state" {
  source = "../../../../modules/vpc-state"
  key    = "${local.service}/${local.environment}/${local.region}/vpc/terraform.tfstate"
}
'''


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, n = sys.argv[1], sys.argv[2]
    subprocess.run(["python3", GEN, out, n], check=True, stdout=subprocess.DEVNULL)
    lib = os.path.join(out, "modules", "vpc-state")
    os.makedirs(lib, exist_ok=True)
    with open(os.path.join(lib, "main.tf"), "w") as f:
        f.write(LIBRARY)
    with open(os.path.join(out, ".terraci.yaml"), "w") as f:
        f.write('structure:\n  pattern: "{service}/{environment}/{region}/{module}"\n'
                'library_modules:\n  paths:\n    - modules\n')
    for top, _, files in os.walk(out):
        if "main.tf" not in files or top.startswith(os.path.join(out, "modules")):
            continue
        path = os.path.join(top, "main.tf")
        with open(path) as f:
            text = f.read()
        text = text.replace('    region = "eu-central-1"\n  }\n  required_providers',
                            '    region = "eu-central-1"\n    workspace_key_prefix = "env"\n  }\n  required_providers', 1)
        if os.path.basename(top) != "vpc" and os.path.isdir(os.path.join(os.path.dirname(top), "vpc")):
            text += CALL
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
