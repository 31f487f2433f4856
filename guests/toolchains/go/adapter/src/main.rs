//! Writes the WASI preview1 reactor adapter to the path given as the only argument.

fn main() {
    let out = std::env::args()
        .nth(1)
        .expect("usage: write-adapter OUT.wasm");
    std::fs::write(
        &out,
        wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
    )
    .unwrap_or_else(|e| panic!("writing {out}: {e}"));
}
