use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: xtask module-cycles [--manifest-path Cargo.toml]\n\
    module-cycles: fails when a module of any crate of the workspace names, directly or\n\
    through others, a module that names it back (test-only code left out)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let manifest = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["module-cycles"] => None,
        ["module-cycles", "--manifest-path", path] => Some(PathBuf::from(path)),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match module_cycles(manifest) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("xtask module-cycles: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Prints every cycle; true when there is none.
fn module_cycles(manifest: Option<PathBuf>) -> anyhow::Result<bool> {
    let base = std::env::current_dir()?;
    let crates = xtask::workspace_crates(manifest.as_deref())?;
    let (mut modules, mut clean) = (0, true);
    for krate in &crates {
        let (count, cycles) = xtask::report_cycles(krate, &base)?;
        modules += count;
        if !cycles.is_empty() {
            eprint!("{cycles}");
            clean = false;
        }
    }
    if clean {
        println!(
            "module-cycles: {} crates, {modules} modules, no cycle",
            crates.len()
        );
    }
    Ok(clean)
}
