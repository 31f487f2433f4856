//! The `wasmop` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    wasmop::main()
}
