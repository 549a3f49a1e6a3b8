# An image with terraci and terraform, for the jobs that run terraci: the policy gate of
# apply jobs, the summary job and the policy-check job (`generate` warns,
# `image-without-terraci`, when one of them would run in an image without it).
#
#   docker build -t registry.example.com/terraci:1 .
#   docker build --build-arg BASE=ghcr.io/opentofu/opentofu:1.10 -t .../terraci-tofu:1 .
#
# then, in .terraci.yaml: `extensions: {gitlab: {image: registry.example.com/terraci:1}}`.
# The official terraform and OpenTofu images are Alpine (musl), so terraci is built on
# Alpine too; the image keeps their binary and adds /usr/local/bin/terraci.
ARG BASE=hashicorp/terraform:1.11

FROM rust:1-alpine AS build
RUN apk add --no-cache build-base git
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p terraci

FROM ${BASE}
COPY --from=build /src/target/release/terraci /usr/local/bin/terraci
# The official images' entrypoint is the binary; a CI job needs the shell.
ENTRYPOINT []
