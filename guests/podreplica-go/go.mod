module wasmop/podreplica-go

go 1.25

require wasmop/sdk v0.0.0

require go.bytecodealliance.org/pkg v0.4.0 // indirect

// The SDK from this repository, and the runtime of its generated bindings (patched, not
// served by the Go module proxy: ../sdk-go/third_party/go-pkg/WASMOP.md).
replace (
	go.bytecodealliance.org/pkg => ../sdk-go/third_party/go-pkg
	wasmop/sdk => ../sdk-go
)
