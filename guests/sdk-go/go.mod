module wasmop/sdk

go 1.25

require go.bytecodealliance.org/pkg v0.4.0

// The runtime package of the generated bindings (wit/), patched, not served by the Go module
// proxy: see third_party/go-pkg/WASMOP.md. A plugin's go.mod needs the same replace.
replace go.bytecodealliance.org/pkg => ./third_party/go-pkg
