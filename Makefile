# wasmop — the two commands a newcomer needs:
#   make demo   set up everything and run the demo on a local control plane
#   make test   run the whole test suite (what CI runs)
#
# Expensive builds live outside the clone, keyed by version, so a second run is fast:
# the cargo target directory and the local control plane under ~/.cache/wasmop/.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
WASMOP_CACHE ?= $(HOME)/.cache/wasmop
export CARGO_TARGET_DIR ?= $(WASMOP_CACHE)/target
export CARGO_TERM_COLOR ?= never
GUESTS := -p podreplica -p chaospod -p cronjob -p dnsrecord
PLUGIN_CRATES := $(GUESTS) -p wasmop-hostile

# One host build serves everything: the end-to-end tests, the benchmarks, the demo and the
# image all use the same static release binary, and the host's and guests' native unit tests
# are compiled in that same profile, target and package set, so every dependency is compiled
# once (cargo unifies features per invocation: keep HOST_PKGS the same everywhere).
HOST_TARGET := x86_64-unknown-linux-musl
HOST_BUILD := --locked --release --target $(HOST_TARGET)
HOST_PKGS := -p wasmop -p wasmop-contract -p wasmop-sdk $(GUESTS) -p podreplica-kube-rs
WASMOP := $(CARGO_TARGET_DIR)/$(HOST_TARGET)/release/wasmop
export WASMOP_BIN := $(WASMOP)

# Lint while building: every cargo command below compiles this workspace's own crates through
# clippy-driver, denying warnings (dependencies are compiled by rustc as always). `cargo
# clippy` would compile every dependency a second time, check-only (7.5 minutes of a cold
# run); this way the lint's build is the build the tests use. Tests that build a plugin as
# its author would (scaffold, dev, tutorial) remove both variables.
export RUSTC_WORKSPACE_WRAPPER = $(shell rustup which clippy-driver)
export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# Plugins: one target directory for the shipped components and the test-only variants.
PLUGIN_DIR := $(CARGO_TARGET_DIR)/wasm32-wasip2/plugin
export WASMOP_PLUGIN_DIR := $(PLUGIN_DIR)
PLUGIN_BUILD := cargo build --locked --target wasm32-wasip2 --profile plugin $(PLUGIN_CRATES)
# (what other languages' builds and tests leave in guests/ is not an input: a make test that
# builds the Python and TypeScript plugins after these must not make them stale)
GUEST_INPUTS := $(shell find guests contract wit -type f -not -path '*/build/*' \
  -not -path '*/__pycache__/*' -not -path '*/node_modules/*' -not -path '*/.pytest_cache/*') \
  Cargo.toml Cargo.lock rust-toolchain.toml

# The suites of `make test`, in order; scripts/test-suites runs each, times it and prints a
# summary. The builds come first as suites of their own, so their cost shows in every log.
TEST_SUITES := lint host plugins cluster tools otel toolchains polyglot test-unit test-guests-wasm \
  golden test-polyglot sdk-check crds-check helm helm-check cluster-test monitoring-check e2e bench-smoke image deploy-test

.PHONY: all setup host plugins cluster tools toolchains polyglot test-polyglot test lint test-unit e2e bench bench-scale references bench-oci bench-smoke cutoff-at-size test-guests-wasm golden sdk-check crds crds-check helm helm-check cluster-test monitoring-check demo clean-cache

all: host plugins

## setup: install what the project needs (rust target, rustfmt, clippy; Debian tools the
## local control plane, the loopback OCI registry and the monitoring check use, when missing)
DEBIAN_TOOLS := curl:curl openssl:openssl ss:iproute2 flock:util-linux setsid:util-linux \
  musl-gcc:musl-tools strip:binutils docker-registry:docker-registry htpasswd:apache2-utils \
  prometheus:prometheus
setup:
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
	@command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || { echo "go not found: install Go (the local control plane is built from the Go module proxy)" >&2; exit 1; }
	@missing=""; for t in $(DEBIAN_TOOLS); do command -v $${t%%:*} >/dev/null || missing="$$missing $${t##*:}"; done; \
	  if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	rustup show active-toolchain >/dev/null
	rustup target add wasm32-wasip2 $(HOST_TARGET)
	rustup component add rustfmt clippy

## host: the host binary (static, release) and everything the native tests link; beside
## it `kubectl-wasmop`, the same binary as a kubectl plugin (`kubectl wasmop status`)
host: setup
	cargo build $(HOST_BUILD) $(HOST_PKGS)
	ln -sf wasmop $(dir $(WASMOP))kubectl-wasmop

## plugins: build the plugin components with the `plugin` profile (opt-level 2, LTO, stripped),
## plus the test-only variants
## (PodReplica v2 and v3, DnsRecord v2, CronJob with stricter validation, PodReplica under another name, PodReplica trapping in every
## reconcile, PodReplica reading a ConfigMap it names, PodReplica with admission webhooks, a plugin that traps in info(), the
## hostile plugin declaring more permissions, the hostile plugin watching a kind no CRD
## defines, for the hot-swap, identity, rollout, references, principals and kinds tests). The variants
## are built first in the same target directory (only the two crates whose features differ
## are recompiled) and copied aside; the shipped build comes last, so the directory ends with it.
plugins: setup $(PLUGIN_DIR)/variants.stamp
	$(PLUGIN_BUILD)
	@ls -l $(PLUGIN_DIR)/*.wasm

$(PLUGIN_DIR)/variants.stamp: $(GUEST_INPUTS)
	$(PLUGIN_BUILD) --features podreplica/v2,wasmop-hostile/trap-info,dnsrecord/v2
	cp $(PLUGIN_DIR)/podreplica.wasm $(PLUGIN_DIR)/podreplica_v2.wasm
	cp $(PLUGIN_DIR)/dnsrecord.wasm $(PLUGIN_DIR)/dnsrecord_v2.wasm
	cp $(PLUGIN_DIR)/wasmop_hostile.wasm $(PLUGIN_DIR)/wasmop_hostile_trap_info.wasm
	$(PLUGIN_BUILD) --features podreplica/v3,wasmop-hostile/more-permissions,cronjob/strict
	cp $(PLUGIN_DIR)/podreplica.wasm $(PLUGIN_DIR)/podreplica_v3.wasm
	cp $(PLUGIN_DIR)/cronjob.wasm $(PLUGIN_DIR)/cronjob_strict.wasm
	cp $(PLUGIN_DIR)/wasmop_hostile.wasm $(PLUGIN_DIR)/wasmop_hostile_more.wasm
	$(PLUGIN_BUILD) --features podreplica/renamed,wasmop-hostile/unwatchable
	cp $(PLUGIN_DIR)/podreplica.wasm $(PLUGIN_DIR)/podreplica_renamed.wasm
	cp $(PLUGIN_DIR)/wasmop_hostile.wasm $(PLUGIN_DIR)/wasmop_hostile_unwatchable.wasm
	$(PLUGIN_BUILD) --features podreplica/broken
	cp $(PLUGIN_DIR)/podreplica.wasm $(PLUGIN_DIR)/podreplica_broken.wasm
	$(PLUGIN_BUILD) --features podreplica/configured
	cp $(PLUGIN_DIR)/podreplica.wasm $(PLUGIN_DIR)/podreplica_configured.wasm
	$(PLUGIN_BUILD) --features podreplica/admitted
	cp $(PLUGIN_DIR)/podreplica.wasm $(PLUGIN_DIR)/podreplica_admitted.wasm
	touch $@

## tools: build cosign and oras, the independent OCI tools the interop test checks wasmop
## against (once per machine; cached under ~/.cache/wasmop/tools)
tools:
	tests/registry/build-tools >/dev/null

## otel: build otlp-receiver, the OpenTelemetry Collector's OTLP receiver the trace test exports
## to (tests/otel/build, once per machine; cached under ~/.cache/wasmop/tools)
.PHONY: otel
otel:
	tests/otel/build >/dev/null

## toolchains: install the Python, TypeScript and Go plugin toolchains (componentize-py,
## pytest; componentize-js, jco, rolldown, tsc; the WASI reactor adapter of the host's
## wasmtime for Go, whose component jco makes), pinned in guests/toolchains/ (once per
## machine; cached under ~/.cache/wasmop/toolchains)
toolchains:
	guests/toolchains/install >/dev/null
	guests/toolchains/go/install >/dev/null

## polyglot: the article's PodReplica built from Python, TypeScript and Go
## (guests/podreplica-py, -ts, -go), beside the Rust one in the plugins directory
POLYGLOT_INPUTS := $(shell find guests/sdk-py guests/sdk-ts guests/podreplica-py guests/podreplica-ts \
  guests/toolchains -type f -not -path '*/build/*' -not -path '*/__pycache__/*') wit/plugin.wit
GO_INPUTS := $(shell find guests/sdk-go guests/podreplica-go guests/toolchains/go -type f) wit/plugin.wit
POLYGLOT := $(PLUGIN_DIR)/podreplica_py.wasm $(PLUGIN_DIR)/podreplica_ts.wasm $(PLUGIN_DIR)/podreplica_go.wasm
polyglot: toolchains $(POLYGLOT)
	@ls -l $(POLYGLOT)

$(PLUGIN_DIR)/podreplica_go.wasm: $(GO_INPUTS)
	@mkdir -p $(PLUGIN_DIR)
	guests/toolchains/go/plugin build guests/podreplica-go $@

$(PLUGIN_DIR)/podreplica_py.wasm: $(POLYGLOT_INPUTS)
	@mkdir -p $(PLUGIN_DIR)
	guests/toolchains/plugin build guests/podreplica-py $@

$(PLUGIN_DIR)/podreplica_ts.wasm: $(POLYGLOT_INPUTS)
	@mkdir -p $(PLUGIN_DIR)
	guests/toolchains/plugin build guests/podreplica-ts $@

## cluster: build the local control plane (once per machine; cached under ~/.cache/wasmop)
cluster:
	tests/cluster/build >/dev/null

## test: the whole suite, one suite after another (a failed suite does not stop the
## others), then a summary: each suite's wall time and result, and the total
test:
	scripts/test-suites $(TEST_SUITES)

## lint: rustfmt; clippy (deny warnings) on the host, its tests and benchmarks, and on the
## guests natively and on wasm32-wasip2, by building them (see RUSTC_WORKSPACE_WRAPPER);
## the host's layers (host/tests/layers.rs: every import points down the map of src/lib.rs)
lint: setup
	cargo fmt --all -- --check
	cargo build $(HOST_BUILD) $(HOST_PKGS) --all-targets
	cargo test $(HOST_BUILD) $(HOST_PKGS) --test layers
	$(PLUGIN_BUILD)

## test-unit: unit tests of the host, the contract, the SDK and the guests (natively), and
## the hostile-plugin tests; release, like the image (the same build as `make host`)
test-unit: host plugins
	cargo test $(HOST_BUILD) $(HOST_PKGS) --lib --bins --test hostile

## e2e: the host against a local control plane, one cluster per test. Most tests spend their
## time waiting (leases, intervals, the API server): two run at a time, their output shown per
## test when they end. Then two lanes side by side, one test at a time in each: the tests at
## size (thousands of objects keep the cores busy) and the ones that compile a plugin as its
## author would (cold, minutes of compiling) or restart what they run; the second lane's
## output is printed when both have ended. A failed test stops neither group.
E2E_AT_SIZE := shards:: size:: progress:: effects::records_outside
E2E_BUILDS := dev:: scaffold:: tutorial:: hotswap:: restart::
E2E_TEST := cargo test $(HOST_BUILD) $(HOST_PKGS) --no-fail-fast --test e2e --
e2e: host plugins polyglot cluster tools otel
	status=0; \
	$(E2E_TEST) --test-threads=2 --show-output $(addprefix --skip ,$(E2E_AT_SIZE) $(E2E_BUILDS)) || status=1; \
	builds_log=$$(mktemp); \
	$(E2E_TEST) --test-threads=1 --nocapture $(E2E_BUILDS) >$$builds_log 2>&1 & builds=$$!; \
	trap 'kill $$builds 2>/dev/null || true; rm -f $$builds_log' EXIT; \
	$(E2E_TEST) --test-threads=1 --nocapture $(E2E_AT_SIZE) || status=1; \
	wait $$builds || status=1; \
	echo "== e2e: the lane of $(E2E_BUILDS)"; cat $$builds_log; \
	scripts/with-cluster cargo test $(HOST_BUILD) $(HOST_PKGS) --test lease -- --test-threads=1 \
	  || status=1; \
	exit $$status

## test-guests-wasm: the same guest unit tests compiled to wasm32-wasip2, run under wasmtime
test-guests-wasm: host
	CARGO_TARGET_WASM32_WASIP2_RUNNER="$(WASMOP) wasi-run" \
	  cargo test --locked --target wasm32-wasip2 -p wasmop-sdk $(GUESTS)

## test-polyglot: the Python, TypeScript and Go SDKs' and PodReplicas' own unit tests in their
## languages' runners (pytest; node --test after tsc checks the types; go vet and go test),
## then the conformance
## suite: every PodReplica passes guests/conformance/podreplica and declares the same plugin
test-polyglot: host plugins polyglot
	guests/toolchains/plugin test guests/sdk-py
	guests/toolchains/plugin test guests/podreplica-py
	guests/toolchains/plugin test guests/sdk-ts
	guests/toolchains/plugin test guests/podreplica-ts
	guests/toolchains/go/plugin test guests/sdk-go
	guests/toolchains/go/plugin test guests/podreplica-go
	cargo test $(HOST_BUILD) $(HOST_PKGS) --test conformance

## sdk-check: the SDK and the contract as a plugin outside this repository gets them: their
## doc examples compile and pass, their docs build without a warning, and both package and
## build from their packages alone, for wasm32-wasip2 as a plugin builds them (cargo package
## verifies each in isolation). The doc tests run over the host build's package set (only the
## SDK and the contract have runnable examples): with the same set, cargo unifies the same
## features and reuses the build's dependencies instead of compiling them again (1 min 40 s cold).
sdk-check: host
	cargo test $(HOST_BUILD) $(HOST_PKGS) --doc
	RUSTDOCFLAGS="-D warnings" cargo doc $(HOST_BUILD) --no-deps -p wasmop-sdk -p wasmop-contract
	cargo package --locked -p wasmop-contract -p wasmop-sdk --allow-dirty --target wasm32-wasip2
	@echo "sdk-check: doc tests pass, docs build, wasmop-contract and wasmop-sdk package and build alone"

## golden: golden cases through the real components in the production sandbox
golden: host plugins
	$(WASMOP) test $(PLUGIN_DIR)/podreplica.wasm guests/conformance/podreplica
	$(WASMOP) test $(PLUGIN_DIR)/chaospod.wasm guests/chaospod/cases
	$(WASMOP) test $(PLUGIN_DIR)/cronjob.wasm guests/cronjob/cases

## crds: generate deploy/crds (the plugins' CRDs and WasmPlugin's) and deploy/plugins (the
## RBAC each bundled plugin declares: `wasmop rbac`), and their copies in the Helm chart
## (deploy/chart/files/: a chart cannot read files outside its directory), with the alerts
## of deploy/monitoring
CHART_COPIES := crds/podreplica.yaml crds/chaospod.yaml crds/wasmplugin.yaml plugins/podreplica.yaml \
  plugins/chaospod.yaml monitoring/prometheus-rules.yaml
crds: host plugins
	mkdir -p deploy/crds deploy/plugins deploy/chart/files/crds deploy/chart/files/plugins deploy/chart/files/monitoring
	$(WASMOP) info --crd $(PLUGIN_DIR)/podreplica.wasm > deploy/crds/podreplica.yaml
	$(WASMOP) info --crd $(PLUGIN_DIR)/chaospod.wasm > deploy/crds/chaospod.yaml
	$(WASMOP) crd > deploy/crds/wasmplugin.yaml
	$(WASMOP) rbac --sharding $(PLUGIN_DIR)/podreplica.wasm > deploy/plugins/podreplica.yaml
	$(WASMOP) rbac --sharding $(PLUGIN_DIR)/chaospod.wasm > deploy/plugins/chaospod.yaml
	for f in $(CHART_COPIES); do cp deploy/$$f deploy/chart/files/$$f; done

## crds-check: fail when deploy/crds, deploy/plugins or the chart's copies are out of date
crds-check: host plugins
	@for p in podreplica chaospod; do \
	  $(WASMOP) info --crd $(PLUGIN_DIR)/$$p.wasm | diff -u deploy/crds/$$p.yaml - \
	    || { echo "deploy/crds/$$p.yaml is out of date: run 'make crds'" >&2; exit 1; }; \
	  $(WASMOP) rbac --sharding $(PLUGIN_DIR)/$$p.wasm | diff -u deploy/plugins/$$p.yaml - \
	    || { echo "deploy/plugins/$$p.yaml is out of date: run 'make crds'" >&2; exit 1; }; \
	done
	@$(WASMOP) crd | diff -u deploy/crds/wasmplugin.yaml - \
	  || { echo "deploy/crds/wasmplugin.yaml is out of date: run 'make crds'" >&2; exit 1; }
	@for f in $(CHART_COPIES); do \
	  diff -u deploy/$$f deploy/chart/files/$$f \
	    || { echo "deploy/chart/files/$$f differs from deploy/$$f: run 'make crds'" >&2; exit 1; }; \
	done
	@echo "crds: deploy/crds, deploy/plugins and deploy/chart/files are up to date"

## helm: build helm, which the chart is tested with (once per machine; cached under
## ~/.cache/wasmop/tools)
helm:
	tests/helm/build >/dev/null

## helm-check: the Helm chart (deploy/chart): lint, default values render exactly
## `kubectl kustomize deploy/`, other values take effect, bad values are refused, and
## install, upgrade and uninstall on a local control plane (tests/helm/check)
helm-check: helm cluster
	tests/helm/check

## bench: sandboxed decision against the same decision compiled natively (prints ratios);
## then PodReplica in each language: size, load cold and from the disk cache, decision time
## at 1/10/100 pods, guest memory of one call
bench: plugins polyglot
	cargo bench --locked --target $(HOST_TARGET) $(HOST_PKGS) --bench decision
	cargo bench --locked --target $(HOST_TARGET) $(HOST_PKGS) --bench languages

## bench-scale: the host converging 100/300/1,000 PodReplicas against a bare client's
## floor, on fresh local control planes, then wasmop against a controller-runtime and a
## kube-rs PodReplica at the largest size (arguments: BENCH_SCALE_ARGS="--objects 300")
bench-scale: host plugins cluster references
	cargo bench --locked --target $(HOST_TARGET) $(HOST_PKGS) --bench scale -- $(BENCH_SCALE_ARGS)

## references: the operators bench-scale compares wasmop with (bench/reference/): PodReplica
## written with controller-runtime (built from the Go module proxy, cached under
## ~/.cache/wasmop/reference) and with kube-rs's Controller (no wasm)
## (the kube-rs one is part of every host build and of make test; the Go one is vetted and
## unit-tested by its build script, once per change of its source)
references: host
	bench/reference/controller-runtime/build >/dev/null

## bench-oci: pull and load times of plugins from a registry, cold and warm (scripts/bench-oci);
## the large component is PodReplica built without optimisation (dev profile, debug info)
bench-oci: host plugins cluster
	cargo build --locked --target wasm32-wasip2 -p podreplica
	scripts/bench-oci $(BENCH_OCI_ARGS)

## bench-smoke: bench-scale with 100 PodReplicas, asserting correctness only (in make test)
bench-smoke: host plugins cluster
	cargo bench --locked --target $(HOST_TARGET) $(HOST_PKGS) --bench scale -- --smoke

## cutoff-at-size: 1,000 PodReplicas over three sharded replicas with every pod create held
## past each shard's write deadline (committed after the writer gave up); the sampler
## bounds every PodReplica by its size for the whole run (minutes; not in make test)
cutoff-at-size: host plugins cluster
	$(E2E_TEST) --ignored --nocapture cutoff::sharded_creates_cut_off_at_size_are_never_doubled

## demo: the article's operators on a local control plane, step by step
demo:
	scripts/demo

## cluster-test: the local control plane's own test
cluster-test: cluster
	tests/cluster/smoke-test

## monitoring-check: the alerts and the dashboard (deploy/monitoring) against a real Prometheus
## (Debian's, from make setup): promtool check and test rules, then the host scraped through
## the article's scenario, every alert and dashboard query returning data (tests/monitoring/check)
monitoring-check: host plugins cluster
	tests/monitoring/check

clean-cache:
	rm -rf $(WASMOP_CACHE)

## image: the host image (deploy/Containerfile: FROM scratch, static musl binary, the two
## plugins), built offline with buildah into an OCI archive; prints its path and size
.PHONY: image deploy-test
image: setup
	scripts/image

## deploy-test: deploy/ against a local control plane: apply (twice), the ServiceAccount's
## permissions, and the image run with runc under exactly that RBAC (PodReplica, push, ChaosPod);
## then the same from the Helm chart (helm install deploy/chart)
deploy-test: image plugins helm
	cargo build $(HOST_BUILD) -p wasmop --example hostile-registry
	status=0; tests/deploy/run || status=1; tests/deploy/run --helm || status=1; exit $$status
