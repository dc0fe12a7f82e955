//! What the test-kit runs share.

/// Stack of a thread that builds and runs a test-kit [`Pair`](mrc_firmware::testkit::Pair):
/// two NICs, their memory and the channel are ~400 KB, which an unoptimised build copies a few
/// times while it builds them (the optimised NIC image builds the same pair in a few hundred
/// KiB of stack). 8 MiB, the Linux main thread's default.
pub const PAIR_STACK: usize = 8 << 20;

/// Run `f` on a thread with [`PAIR_STACK`] bytes of stack; a panic in `f` fails the caller.
pub fn on_pair_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(PAIR_STACK)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("test thread panicked")
}
