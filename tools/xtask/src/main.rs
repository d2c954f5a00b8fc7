use std::path::PathBuf;
use std::process::ExitCode;

use xtask::lengths::FunctionLength;

const USAGE: &str = "usage: xtask module-cycles [--manifest-path Cargo.toml]\n\
    \x20      xtask function-lengths [--max LINES] [--report-only] [--manifest-path Cargo.toml]\n\
    module-cycles: fails when a module of any crate of the workspace names, directly or\n\
    through others, a module that names it back (test-only code left out)\n\
    function-lengths: lists the longest functions of every crate's src/ and tests/ and fails\n\
    when one is longer than --max lines (120); --report-only lists them and never fails";

/// The longest a function may be, in lines from `fn` to its closing brace.
const MAX_FUNCTION_LINES: usize = 120;

/// How many of each crate's longest functions are listed.
const LISTED: usize = 3;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, options) = match args.split_first() {
        Some((task, options)) => (task.as_str(), options),
        None => return usage(),
    };
    let mut manifest = None;
    let mut max = MAX_FUNCTION_LINES;
    let mut report_only = false;
    let mut options = options.iter();
    while let Some(option) = options.next() {
        match (task, option.as_str(), options.clone().next()) {
            (_, "--manifest-path", Some(path)) => manifest = Some(PathBuf::from(path)),
            ("function-lengths", "--max", Some(lines)) => match lines.parse() {
                Ok(lines) => max = lines,
                Err(_) => return usage(),
            },
            ("function-lengths", "--report-only", _) => {
                report_only = true;
                continue;
            }
            _ => return usage(),
        }
        options.next();
    }
    let outcome = match task {
        "module-cycles" => module_cycles(manifest),
        "function-lengths" => function_lengths(manifest, max).map(|ok| ok || report_only),
        _ => return usage(),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("xtask {task}: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
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

/// Prints each crate's longest functions and every one over `max` lines; true when there is
/// none.
fn function_lengths(manifest: Option<PathBuf>, max: usize) -> anyhow::Result<bool> {
    let base = std::env::current_dir()?;
    let show = |f: &FunctionLength| {
        let file = f.file.strip_prefix(&base).unwrap_or(&f.file);
        format!("{:>5}  {}  {}:{}", f.lines, f.name, file.display(), f.line)
    };
    let mut over = Vec::new();
    println!(
        "function-lengths: the longest functions of each crate's src/ and tests/ (lines, name, place)"
    );
    for (package, src) in xtask::code_dirs(manifest.as_deref())? {
        let functions = xtask::lengths::functions_under(&src)?;
        println!("{package} ({} functions)", functions.len());
        for function in functions.iter().take(LISTED) {
            println!("  {}", show(function));
        }
        over.extend(functions.into_iter().filter(|f| f.lines > max));
    }
    if over.is_empty() {
        println!("function-lengths: no function over {max} lines");
        return Ok(true);
    }
    eprintln!(
        "function-lengths: {} functions over {max} lines:",
        over.len()
    );
    for function in &over {
        eprintln!("  {}", show(function));
    }
    Ok(false)
}
