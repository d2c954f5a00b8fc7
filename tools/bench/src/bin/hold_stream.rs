//! The post-renderer benchmark's holding floor: reads all of stdin into one room, then
//! writes it to stdout, as the post-renderer must hold the whole stream before it writes (all
//! or nothing) but with no work on it. `--pages ordinary` holds it in ordinary heap memory,
//! `--pages huge` in memory advised for transparent huge pages where the kernel offers them
//! (the post-renderer's own `held_memory`, so both floors hold the way it does).
//!
//! `hold_stream --pages huge < stream > out`

use std::io::Write;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use styrmin_postrender::held_memory::{HUGE_PAGE, HeldBytes, Pages};

#[derive(Parser, Debug)]
#[command(about = "Holds all of stdin in memory, then writes it to stdout")]
struct Args {
    /// The pages the stream is held in.
    #[arg(
        long,
        value_enum,
        env = "STYRMIN_BENCH_PAGES",
        default_value = "ordinary"
    )]
    pages: PageKind,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PageKind {
    Ordinary,
    Huge,
}

fn main() -> anyhow::Result<()> {
    let Args { pages } = Args::parse();
    let pages = match pages {
        PageKind::Ordinary => Pages::Ordinary,
        PageKind::Huge => Pages::offered(0),
    };
    let mut held = HeldBytes::with_room(64 << 20, pages);
    let mut stdin = std::io::stdin().lock();
    while held
        .read_from(&mut stdin, HUGE_PAGE)
        .context("reading stdin")?
        > 0
    {}
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&held)
        .and_then(|()| stdout.flush())
        .context("writing stdout")
}
