set -e
root=$1
for m in platform/stage/eu-central-1/app platform/stage/eu-central-1/bad platform/stage/eu-central-1/vpc platform/sandbox/eu-central-1/test platform/prod/eu-central-1/db legacy/old/eu-central-1/db; do
  w=$(mktemp -d); cp $root/$m/main.tf $w/
  (cd $w && terraform init -input=false -no-color >/dev/null && terraform plan -input=false -no-color -out=plan.tfplan >/dev/null && terraform show -json plan.tfplan | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("timestamp",None); print(json.dumps(d, indent=1, sort_keys=True))' > $root/$m/plan.json)
  rm -rf $w
done
