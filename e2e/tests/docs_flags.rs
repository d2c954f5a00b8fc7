//! docs/config.md's flag tables are the programs' own: each is written from the clap
//! `Command` that `--help` prints (`styrmin_test_support::flag_docs`), so a flag missing from
//! the document, or a default or help that differs from `--help`, fails here. `make docs`
//! rewrites the tables (this test with `STYRMIN_WRITE_DOCS=1`).

use clap::CommandFactory as _;
use styrmin_e2e::workspace_root;
use styrmin_test_support::flag_docs::{flag_table, with_flag_tables};

fn subcommand(command: &clap::Command, name: &str) -> String {
    flag_table(
        command
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {name}")),
    )
}

fn tables() -> Vec<(&'static str, String)> {
    let postrender = styrmin_postrender::cli::Cli::command();
    let webhook = styrmin_webhook::cli::Cli::command();
    vec![
        ("styrmin-postrender", flag_table(&postrender)),
        ("styrmin-postrender flux", subcommand(&postrender, "flux")),
        ("styrmin-webhook serve", subcommand(&webhook, "serve")),
        ("styrmin-webhook audit", subcommand(&webhook, "audit")),
        ("styrmin-webhook plan", subcommand(&webhook, "plan")),
        (
            "styrmin-certs",
            flag_table(&styrmin_certs::cli::Args::command()),
        ),
    ]
}

#[test]
fn config_md_flag_tables_are_those_of_help() {
    let path = workspace_root().join("docs/config.md");
    let text = std::fs::read_to_string(&path).expect("docs/config.md");
    let want = with_flag_tables(&text, &tables()).unwrap_or_else(|e| panic!("docs/config.md: {e}"));
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
