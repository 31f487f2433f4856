module go.bytecodealliance.org/pkg

// wasmop patch: upstream says `go 1.27.1`; nothing here needs more than 1.25.
go 1.25
