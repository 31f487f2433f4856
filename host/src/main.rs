//! The `wasmop` binary: everything lives in the library.

/// The host's allocator. musl's own, the static binary's default, takes a third more of the
/// host's CPU under load (1,000 PodReplicas at 3, 5 and 2: 10.3–11.4 s against 7.5–8.5 s).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_arena_eager_commit` (the fifth of its `mi_option_e`): its default
/// on Linux commits each arena whole, which kept ~30 MiB more resident at 1,000
/// PodReplicas than committing pages as they are used.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

fn main() -> std::process::ExitCode {
    // SAFETY: mimalloc's options are not thread-safe to set; this runs first in `main`,
    // before the host starts any thread.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
    }
    wasmop::main()
}
