//! The Helm stream: a rendered chart on stdin, the same stream on stdout with every Ingress
//! given its class (Helm 3's `--post-renderer`, Helm 4's plugin, and the kustomize plugin,
//! which filters a stream too); and `check`, the same pipeline diffed instead of written.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use styrmin_ingress_rules::ResolvedMode;

use crate::render::RenderRules;
use crate::{check as diff, report, streaming};

pub fn filter(
    input: impl Read,
    rules: &RenderRules,
    mode: ResolvedMode,
    report_path: Option<&PathBuf>,
) -> anyhow::Result<ExitCode> {
    // The report is opened first and written before the stream: a report that cannot be
    // written (a directory, a full disk) fails the run with stdout still empty.
    let mut report_file = report_path
        .map(|path| {
            report::open(path)
                .with_context(|| format!("cannot write the report {}", path.display()))
                .map(|file| (path, file))
        })
        .transpose()?;
    // Warn writes the input as it came, so it keeps the input; enforce keeps only the output.
    let keep = if mode.mode.is_warn() {
        streaming::Keep::Input
    } else {
        streaming::Keep::Output
    };
    let mut stream = streaming::render_stream_keeping(input, rules, streaming::BLOCK_BYTES, keep)?;
    // What goes to the report, and what to stderr once the stream is written.
    let (report_text, stderr) = if mode.mode.is_warn() {
        // Warn: the edits are dropped, so what is written is the input as it came.
        let edits = std::mem::take(&mut stream.rendered.changed);
        drop(edits);
        let rendered = &stream.rendered;
        let decided_by = rules.resolved.decided_by().to_string();
        let would = report::would_change(rendered, &decided_by);
        let mut lines = would.clone();
        lines.push_str(&report::warnings(rendered));
        if rules.strict && !would.is_empty() {
            let error = format!(
                "--strict: enforcement_mode warn (decided by {}) and enforcing would change {} Ingresses",
                mode.decided_by(),
                rendered.ingresses.iter().filter(|o| o.edited).count()
            );
            if let Some((_, file)) = &mut report_file {
                let _ = file.write_all(format!("{lines}error: {error}\n").as_bytes());
            }
            eprint!("{lines}");
            eprintln!("styrmin-postrender: error: {error}");
            return Ok(ExitCode::from(1));
        }
        lines.push_str(&report::warn_summary(rendered));
        lines.push('\n');
        (lines, format!("{would}{}", report::warnings(rendered)))
    } else {
        let rendered = &stream.rendered;
        (report::success(rendered), report::warnings(rendered))
    };
    if let Some((path, file)) = &mut report_file {
        file.write_all(report_text.as_bytes())
            .and_then(|()| file.sync_data())
            .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    // Everything is decided before the first byte goes out: no half-written stream.
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    // Flushed here, not on drop, which would swallow the error (a closed stdout): a stream
    // that was not all written is a failure.
    stream
        .write(&mut out)
        .and_then(|()| out.flush())
        .context("writing the stream to stdout")?;
    eprint!("{stderr}");
    Ok(ExitCode::SUCCESS)
}

pub fn check(rules: &RenderRules) -> anyhow::Result<ExitCode> {
    // The same pipeline as the filter, diffed instead of written.
    let stream = streaming::render_stream(std::io::stdin().lock(), rules, streaming::BLOCK_BYTES)?;
    let diff = diff::diff(&stream);
    let rendered = &stream.rendered;
    eprint!("{}", report::warnings(rendered));
    if diff.is_empty() {
        eprintln!("{}: every Ingress conforms", report::summary(rendered));
        Ok(ExitCode::SUCCESS)
    } else {
        print!("{diff}");
        eprintln!("{}", report::summary(rendered));
        Ok(ExitCode::from(1))
    }
}
