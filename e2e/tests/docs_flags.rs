//! docs/config.md's flag tables are the programs' own: each is written from the clap
//! `Command` that `--help` prints (`styrmin_test_support::flag_docs`), walking every program's
//! command tree, so a subcommand or a flag missing from the document, or a default or help that
//! differs from `--help`, fails here. `make docs`
//! rewrites the tables (this test with `STYRMIN_WRITE_DOCS=1`).

use clap::CommandFactory as _;
use styrmin_e2e::workspace_root;
use styrmin_test_support::flag_docs::{flag_tables, with_flag_tables};

/// Every program's command tree, walked: a table for each command with flags of its own.
fn tables() -> Vec<(String, String)> {
    [
        styrmin_postrender::cli::Cli::command(),
        styrmin_webhook::cli::Cli::command(),
        styrmin_certs::cli::Args::command(),
    ]
    .iter()
    .flat_map(flag_tables)
    .collect()
}

#[test]
fn config_md_flag_tables_are_those_of_help() {
    let path = workspace_root().join("docs/config.md");
    let text = std::fs::read_to_string(&path).expect("docs/config.md");
    let tables = tables();
    let tables: Vec<(&str, String)> = tables
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let want = with_flag_tables(&text, &tables).unwrap_or_else(|e| panic!("docs/config.md: {e}"));
    if std::env::var_os("STYRMIN_WRITE_DOCS").is_some() {
        std::fs::write(&path, &want).expect("writes docs/config.md");
        return;
    }
    if let Some((line, (has, wants))) = text
        .lines()
        .zip(want.lines())
        .enumerate()
        .find(|(_, (has, wants))| has != wants)
    {
        panic!(
            "docs/config.md line {}: the flag table differs from --help (run `make docs`)\n  has:   {has}\n  wants: {wants}",
            line + 1
        );
    }
    assert_eq!(
        text.lines().count(),
        want.lines().count(),
        "docs/config.md: a flag table's length differs from --help (run `make docs`)"
    );
}
