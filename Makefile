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
WASMOP := $(CARGO_TARGET_DIR)/debug/wasmop
PLUGIN_DIR := $(CARGO_TARGET_DIR)/wasm32-wasip2/plugin
export WASMOP_PLUGIN_DIR := $(PLUGIN_DIR)
GUESTS := -p podreplica -p chaospod
PLUGIN_CRATES := $(GUESTS) -p wasmop-hostile

.PHONY: all setup host plugins test lint test-host e2e bench test-guests test-guests-wasm golden crds crds-check cluster-test demo clean-cache

all: host plugins

## setup: install what the project needs (rust target, rustfmt, clippy; Debian tools the
## local control plane uses, when missing)
DEBIAN_TOOLS := curl:curl openssl:openssl ss:iproute2 flock:util-linux setsid:util-linux
setup:
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
	@command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || { echo "go not found: install Go (the local control plane is built from the Go module proxy)" >&2; exit 1; }
	@missing=""; for t in $(DEBIAN_TOOLS); do command -v $${t%%:*} >/dev/null || missing="$$missing $${t##*:}"; done; \
	  if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	rustup show active-toolchain >/dev/null
	rustup target add wasm32-wasip2
	rustup component add rustfmt clippy

host: setup
	cargo build -p wasmop

## plugins: build the plugin components with the size profile (plus the test-only
## variants: PodReplica v2 and v3 and a plugin that traps in info(), for the hot-swap tests)
plugins: setup
	cargo build --target wasm32-wasip2 --profile plugin $(PLUGIN_CRATES)
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variants cargo build --target wasm32-wasip2 --profile plugin \
	  -p podreplica --features podreplica/v2 -p wasmop-hostile --features wasmop-hostile/trap-info
	cp $(CARGO_TARGET_DIR)/variants/wasm32-wasip2/plugin/podreplica.wasm $(PLUGIN_DIR)/podreplica_v2.wasm
	cp $(CARGO_TARGET_DIR)/variants/wasm32-wasip2/plugin/wasmop_hostile.wasm $(PLUGIN_DIR)/wasmop_hostile_trap_info.wasm
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variants-v3 cargo build --target wasm32-wasip2 --profile plugin \
	  -p podreplica --features podreplica/v3
	cp $(CARGO_TARGET_DIR)/variants-v3/wasm32-wasip2/plugin/podreplica.wasm $(PLUGIN_DIR)/podreplica_v3.wasm
	@ls -l $(PLUGIN_DIR)/*.wasm

## test: the whole suite
test: lint test-host test-guests test-guests-wasm golden crds-check cluster-test e2e deploy-test
	@echo "make test: all suites passed"

lint: setup
	cargo fmt --all -- --check
	cargo clippy -p wasmop -p wasmop-contract --all-targets -- -D warnings
	cargo clippy --target wasm32-wasip2 -p wasmop-sdk $(PLUGIN_CRATES) -- -D warnings

test-host: host plugins
	cargo test -p wasmop-contract
	cargo test -p wasmop --lib --bins --test hostile

## e2e: the host against a local control plane (one cluster per test, one test at a time)
e2e: host plugins
	cargo test -p wasmop --test 'e2e_*' -- --test-threads=1 --nocapture
	scripts/with-cluster cargo test -p wasmop --test lease -- --test-threads=1

## test-guests: guest unit tests, natively
test-guests: setup
	cargo test -p wasmop-sdk $(GUESTS)

## test-guests-wasm: the same guest unit tests compiled to wasm32-wasip2, run under wasmtime
test-guests-wasm: host
	CARGO_TARGET_WASM32_WASIP2_RUNNER="$(WASMOP) wasi-run" \
	  cargo test --target wasm32-wasip2 -p wasmop-sdk $(GUESTS)

## golden: golden cases through the real components in the production sandbox
golden: host plugins
	$(WASMOP) test $(PLUGIN_DIR)/podreplica.wasm guests/podreplica/cases
	$(WASMOP) test $(PLUGIN_DIR)/chaospod.wasm guests/chaospod/cases

## crds: regenerate deploy/crds from the plugins
crds: host plugins
	mkdir -p deploy/crds
	$(WASMOP) info --crd $(PLUGIN_DIR)/podreplica.wasm > deploy/crds/podreplica.yaml
	$(WASMOP) info --crd $(PLUGIN_DIR)/chaospod.wasm > deploy/crds/chaospod.yaml
	$(WASMOP) crd > deploy/crds/wasmplugin.yaml

## crds-check: fail when deploy/crds is out of date
crds-check: host plugins
	@for p in podreplica chaospod; do \
	  $(WASMOP) info --crd $(PLUGIN_DIR)/$$p.wasm | diff -u deploy/crds/$$p.yaml - \
	    || { echo "deploy/crds/$$p.yaml is out of date: run 'make crds'" >&2; exit 1; }; \
	done
	@$(WASMOP) crd | diff -u deploy/crds/wasmplugin.yaml - \
	  || { echo "deploy/crds/wasmplugin.yaml is out of date: run 'make crds'" >&2; exit 1; }
	@echo "crds: deploy/crds is up to date"

## bench: sandboxed decision against the same decision compiled natively (prints ratios)
bench: plugins
	cargo bench -p wasmop --bench decision

## demo: the article's operators on a local control plane, step by step
demo:
	scripts/demo

## cluster-test: the local control plane's own test
cluster-test:
	tests/cluster/smoke-test

clean-cache:
	rm -rf $(WASMOP_CACHE)

## image: the host image (deploy/Containerfile: FROM scratch, static musl binary, the two
## plugins), built offline with buildah into an OCI archive; prints its path and size
.PHONY: image deploy-test
image: setup
	scripts/image

## deploy-test: deploy/ against a local control plane: apply (twice), the ServiceAccount's
## permissions, and the image run with runc under exactly that RBAC (PodReplica, push, ChaosPod)
deploy-test: image plugins
	tests/deploy/run
