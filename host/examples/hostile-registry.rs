//! The test support's hostile registry (`tests/support/hostile_registry.rs`) as a process of
//! its own, for tests written in shell (`tests/deploy/run`): it serves on a free loopback
//! port, prints `127.0.0.1:PORT` as its first line, and runs until SIGTERM or SIGINT, when it
//! prints the requests it answered, by kind, and stops.
//!
//! ```sh
//! cargo run --example hostile-registry [MANIFEST_FILE]
//! ```
//! `MANIFEST_FILE`: what `signatures/…` serves (default: an empty manifest).

#[path = "../tests/support/hostile_registry.rs"]
mod hostile_registry;

/// What the support module takes from its sibling in the test support.
mod registry {
    use sha2::Digest;

    /// `sha256:<hex>` of `bytes`.
    pub fn sha256(bytes: &[u8]) -> String {
        format!("sha256:{:x}", sha2::Sha256::digest(bytes))
    }
}

const KINDS: [&str; 5] = [
    "endless",
    "error-body",
    "redirect",
    "signatures",
    "signatures blob",
];

fn main() -> std::io::Result<()> {
    let manifest = match std::env::args_os().nth(1) {
        Some(path) => std::fs::read(path)?,
        None => br#"{"schemaVersion":2,"layers":[]}"#.to_vec(),
    };
    // Redirects point at a loopback port nothing listens on.
    let registry = hostile_registry::HostileRegistry::start(manifest, "127.0.0.1:9");
    println!("{}", registry.address);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        std::io::Result::Ok(())
    })?;
    for kind in KINDS {
        println!("{kind}: {}", registry.requests(kind));
    }
    Ok(())
}
