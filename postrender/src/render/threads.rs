//! The threads that render: each with a stack deep enough for the deepest tree, and no more
//! of them at once than the machine has cores for.

/// At most this many blocks are rendered at once (fewer on a machine with fewer cores).
pub const MAX_BLOCKS_IN_FLIGHT: usize = 4;

/// How many blocks, or parts of a text, render at once: one per core, at most
/// [`MAX_BLOCKS_IN_FLIGHT`] (each block's renderer may use a few threads of its own).
pub(crate) fn in_flight() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_BLOCKS_IN_FLIGHT)
}

/// The stack of every thread that renders: room for the deepest walk over a tree of
/// [`crate::yaml_tree::MAX_NESTING`] levels (about 1.3 MiB at that depth, measured by the `deep_nesting`
/// tests, which render at the bound on threads of this size), with room to spare for a walk
/// that grows. Reserved, not touched: only what a walk uses becomes resident.
pub const RENDER_STACK_BYTES: usize = 64 << 20;

/// Runs `render` on a thread of its own with [`RENDER_STACK_BYTES`] of stack, in `scope`.
/// Rendering never runs on the caller's thread, whose stack may be smaller (2 MiB for a
/// spawned thread, often less under a test harness or in a container).
pub(crate) fn on_render_stack<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    render: impl FnOnce() -> T + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, T> {
    std::thread::Builder::new()
        .name("styrmin-render".to_owned())
        .stack_size(RENDER_STACK_BYTES)
        .spawn_scoped(scope, render)
        // Reserving address space fails only when the process has none left: as fatal as
        // an allocation failure, which aborts too.
        .unwrap_or_else(|e| panic!("cannot start a rendering thread: {e}"))
}

/// Runs `work` on a thread with [`RENDER_STACK_BYTES`] of stack and waits for it: for the
/// program as a whole, so that a walk outside the pipeline (a refused KRM item's reference,
/// say) has the same stack as rendering, whatever the platform gives the main thread (8 MiB
/// on Linux and macOS, 1 MiB on Windows).
pub fn with_render_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| join(on_render_stack(scope, work)))
}

pub(crate) fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
