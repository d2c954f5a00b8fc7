//! The program's routes, each from stdin to stdout and the report: the Helm stream (and
//! `check`), the KRM function and the kustomize exec plugin. The command line ([`crate::cli`])
//! picks one; each reads its input, runs its pipeline ([`crate::streaming`] or
//! [`crate::krm`]), and writes everything or nothing.

use std::io::Read;

use anyhow::Context;

pub mod helm;
pub mod krm_function;
pub mod kustomize_plugin;

/// The first bytes of the input (up to a few hundred, fewer at its end), to tell a
/// ResourceList from a rendered stream; the rest is read after them.
pub(crate) fn read_prefix(input: &mut impl Read) -> anyhow::Result<std::io::Cursor<Vec<u8>>> {
    let mut prefix = Vec::with_capacity(PREFIX_BYTES);
    input
        .take(PREFIX_BYTES as u64)
        .read_to_end(&mut prefix)
        .context("reading the rendered stream from stdin")?;
    Ok(std::io::Cursor::new(prefix))
}

const PREFIX_BYTES: usize = 512;
