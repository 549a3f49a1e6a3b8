#!/bin/bash
# Which (constraint, version) pairs terraform 1.11.4 accepts: one fs mirror per version.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "${1:?a scratch directory}" && cp "$here/constraints.txt" .
VERSIONS="0.9.0 1.0.0 1.2.0 1.2.3 1.2.9 1.3.0 1.10.0 2.0.0-beta1 2.0.0 2.1.0 3.0.0-rc.1"
for v in $VERSIONS; do
  d=mirror_$v/registry.terraform.io/example/tiny
  mkdir -p $d
  rm -rf stage; mkdir stage; echo "tiny $v" > stage/terraform-provider-tiny_v$v
  (cd stage && zip -q -X ../$d/terraform-provider-tiny_${v}_linux_amd64.zip terraform-provider-tiny_v$v)
done
: > results.tsv
while IFS= read -r c; do
  for v in $VERSIONS; do
    rm -rf work; mkdir work
    printf 'terraform {\n  required_providers {\n    tiny = {\n      source  = "example/tiny"\n      version = "%s"\n    }\n  }\n}\n' "$c" > work/main.tf
    out=$(cd work && nice terraform providers lock -fs-mirror=../mirror_$v -platform=linux_amd64 2>&1)
    rc=$?
    if [ $rc = 0 ]; then r=match
    elif echo "$out" | grep -qi "no available releases match"; then r=nomatch
    elif echo "$out" | grep -qi "invalid version constraint\|Invalid provider version constraint"; then r=invalid
    else r="other:$(echo "$out" | tr '\n' ' ' | head -c 300)"; fi
    printf '%s\t%s\t%s\n' "$c" "$v" "$r" >> results.tsv
    [ "$r" = invalid ] && break
  done
done < constraints.txt
echo done > finished
