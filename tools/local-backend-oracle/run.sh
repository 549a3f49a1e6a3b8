#!/usr/bin/env bash
# Asks terraform (1.11.4 gave the answers in fixtures/rules/local-backend) how the local
# backend places state, in a scratch directory: built-in `terraform_data` resources and
# `terraform_remote_state` data sources only, so nothing is downloaded. Not run in CI.
# Prints what each reader read; fixtures/rules/local-backend's comments say the same.
#
#   bash tools/local-backend-oracle/run.sh
set -euo pipefail
export TF_CLI_CONFIG_FILE=/dev/null TF_IN_AUTOMATION=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
terraform version | head -1

owner() { # owner DIR [BACKEND-BLOCK]: a root whose output `id` is "DIR-<workspace>"
  mkdir -p "$1"
  printf '%s\nresource "terraform_data" "x" {\n  input = "%s-${terraform.workspace}"\n}\noutput "id" {\n  value = terraform_data.x.output\n}\n' "${2:-}" "$1" > "$1/main.tf"
}
reader() { # reader DIR CONFIG-BODY [WORKSPACE]: a root printing what it read as `read`
  mkdir -p "$1"
  printf 'data "terraform_remote_state" "r" {\n  backend = "local"\n  workspace = "%s"\n  config = {\n%s\n  }\n}\noutput "read" {\n  value = data.terraform_remote_state.r.outputs.id\n}\n' "${3:-default}" "$2" > "$1/main.tf"
}
apply() { # apply DIR: init and apply, print the outputs or the error
  (cd "$1" && terraform init -no-color >/dev/null &&
    terraform apply -auto-approve -no-color 2>&1 | sed -n -e '/^Outputs:/,$p' -e '/^Error:/p' -e '/^No stored state/p' | sed '/^Outputs:/d;/^$/d' | sed "s|^|  $1: |")
}
staging() { # staging DIR: apply DIR in a new workspace `staging` too
  apply "$1" >/dev/null
  (cd "$1" && terraform workspace new staging -no-color >/dev/null && terraform apply -auto-approve -no-color >/dev/null)
  echo "  $1 keeps:" $(cd "$1" && find . -path ./.terraform -prune -o -name '*tfstate' -type f -print | sort)
}

echo "(a) workspaces other than default"
owner ws/net
staging ws/net
owner ws/net2 'terraform {
  backend "local" {
    path          = "state/net2.tfstate"
    workspace_dir = "wsd"
  }
}'
staging ws/net2
reader ws/app-default '    path = "../net/terraform.tfstate"'
apply ws/app-default
reader ws/app-workspace-dir '    path = "../nowhere/terraform.tfstate"
    workspace_dir = "../net/terraform.tfstate.d"' staging
apply ws/app-workspace-dir
reader ws/app-owner-dir '    workspace_dir = "../net2/wsd"' staging
apply ws/app-owner-dir
reader ws/app-path-only '    path = "../net/terraform.tfstate"' staging
apply ws/app-path-only || true
mkdir -p ws/app-path-only/terraform.tfstate.d/staging
sed 's/ws\/net-staging/planted in ws\/app-path-only\/terraform.tfstate.d\/staging/' \
  ws/net/terraform.tfstate.d/staging/terraform.tfstate \
  > ws/app-path-only/terraform.tfstate.d/staging/terraform.tfstate
apply ws/app-path-only

echo "(b) a relative path in a called module"
owner live/net
apply live/net >/dev/null
owner shared/net
apply shared/net >/dev/null
mkdir -p shared/reader live/svc
cat > shared/reader/main.tf <<'EOF'
data "terraform_remote_state" "relative" {
  backend = "local"
  config = {
    path = "../net/terraform.tfstate"
  }
}
data "terraform_remote_state" "path_module" {
  backend = "local"
  config = {
    path = "${path.module}/../net/terraform.tfstate"
  }
}
output "relative" {
  value = data.terraform_remote_state.relative.outputs.id
}
output "path_module" {
  value = data.terraform_remote_state.path_module.outputs.id
}
output "path_module_is" {
  value = path.module
}
EOF
cat > live/svc/main.tf <<'EOF'
module "reader" {
  source = "../../shared/reader"
}
output "relative" {
  value = module.reader.relative
}
output "path_module" {
  value = module.reader.path_module
}
output "path_module_is" {
  value = module.reader.path_module_is
}
EOF
apply live/svc

echo "(c) two modules keeping one local file"
owner stage/shared-a 'terraform {
  backend "local" {
    path = "../shared.tfstate"
  }
}'
owner stage/shared-b 'terraform {
  backend "local" {
    path = "../shared.tfstate"
  }
}'
sed -i 's/"x"/"y"/; s/terraform_data\.x/terraform_data.y/' stage/shared-b/main.tf
apply stage/shared-a
(cd stage/shared-b && terraform init -no-color >/dev/null &&
  terraform apply -auto-approve -no-color 2>&1 | grep -E '^  # .*(destroyed|created)|^Plan:' | sed 's|^ *|  stage/shared-b: |')
reader stage/reader '    path = "../shared.tfstate"'
apply stage/reader
