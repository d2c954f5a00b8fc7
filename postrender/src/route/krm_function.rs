//! The KRM function: a `ResourceList` on stdin (kustomize's `transformers:` with
//! `--enable-exec`, kpt), the same `ResourceList` on stdout with every Ingress item edited as
//! the stream is, and the `results` ([`crate::krm`]).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::{krm, report};

/// Room for most `ResourceList`s at once: reading a long one into a growing buffer copies it
/// again at every doubling (pages not written to are never touched).
const KRM_INPUT_RESERVE: usize = 64 << 20;

pub fn run(
    input: impl Read,
    fallback: krm::FunctionConfig,
    fallback_given: bool,
    report_path: Option<&PathBuf>,
) -> anyhow::Result<ExitCode> {
    let (text, cut) =
        krm::read(input, KRM_INPUT_RESERVE).context("reading the ResourceList from stdin")?;
    let output = krm::run_cut(text, cut, fallback, fallback_given);
    // The report holds what stderr gets (kustomize shows a function's stderr only on failure).
    if let Some(path) = report_path {
        let lines: String = output.messages.iter().map(|m| format!("{m}\n")).collect();
        report::append(path, &lines)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut out);
    output
        .write(&mut out)
        .and_then(|()| out.flush())
        .context("writing the ResourceList to stdout")?;
    for message in &output.messages {
        eprintln!("styrmin-postrender: {message}");
    }
    Ok(if output.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
