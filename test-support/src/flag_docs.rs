//! The flag tables of docs/config.md, written from the programs' own clap `Command`s, so that
//! a flag, its environment variable, its default and its help are defined once, in the code.
//!
//! A table stands in the document between `<!-- flags: NAME -->` and `<!-- end flags -->`;
//! e2e/tests/docs_flags.rs fails when one differs from what [`flag_table`] writes, and
//! `make docs` rewrites them.

use std::fmt::Write as _;

use clap::{ArgAction, Command};

/// The Markdown table of `command`'s own flags (hidden ones left out), grouped under their
/// help headings in the order they are defined.
pub fn flag_table(command: &Command) -> String {
    let mut out = String::new();
    let mut heading: Option<Option<&str>> = None;
    for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if heading != Some(arg.get_help_heading()) {
            if heading.is_some() {
                out.push('\n');
            }
            if let Some(name) = arg.get_help_heading() {
                let _ = writeln!(out, "{name}:\n");
            }
            out.push_str("| flag | environment | default | meaning |\n|---|---|---|---|\n");
            heading = Some(arg.get_help_heading());
        }
        let mut flag = format!("--{long}");
        if let Some(short) = arg.get_short() {
            flag = format!("-{short}, {flag}");
        }
        let takes_value = matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
        let choices: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect();
        if takes_value {
            let value = if choices.is_empty() {
                arg.get_value_names()
                    .map(|names| {
                        names
                            .iter()
                            .map(|n| n.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
            } else {
                choices.join("|")
            };
            flag = format!("{flag} {value}");
        }
        let environment = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let default = if takes_value {
            arg.get_default_values()
                .iter()
                .map(|v| format!("`{}`", v.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            "off".to_owned()
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{}` | {environment} | {default} | {} |",
            cell(&flag),
            cell(&one_line(&help))
        );
    }
    out
}

/// The flag table of `command` and of every visible subcommand under it, each named by its
/// path from the program (`styrmin-webhook serve`); a command with no flag of its own has
/// none. The tables come from walking clap's command tree, so a new subcommand's flags need
/// a place in the document, or [`with_flag_tables`] names the one missing.
pub fn flag_tables(command: &Command) -> Vec<(String, String)> {
    let mut tables = Vec::new();
    walk(command, command.get_name().to_owned(), &mut tables);
    tables
}

fn walk(command: &Command, path: String, tables: &mut Vec<(String, String)>) {
    let table = flag_table(command);
    let subcommands = command.get_subcommands().filter(|s| !s.is_hide_set());
    let paths: Vec<_> = subcommands
        .map(|sub| (sub, format!("{path} {}", sub.get_name())))
        .collect();
    if !table.is_empty() {
        tables.push((path, table));
    }
    for (sub, path) in paths {
        walk(sub, path, tables);
    }
}

/// `document` with the table between each `<!-- flags: NAME -->` and the next
/// `<!-- end flags -->` replaced by `tables`' table of that name; an error names a marker
/// without its table, or a table without its marker.
pub fn with_flag_tables(document: &str, tables: &[(&str, String)]) -> Result<String, String> {
    const END: &str = "<!-- end flags -->";
    let mut out = String::with_capacity(document.len());
    let mut rest = document;
    let mut used = Vec::new();
    while let Some(start) = rest.find("<!-- flags: ") {
        let open_end = rest[start..]
            .find("-->")
            .map(|i| start + i + 3)
            .ok_or("a `<!-- flags:` marker does not close")?;
        let name = rest[start + "<!-- flags: ".len()..open_end - 3].trim();
        let (_, table) = tables
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or(format!("no table named {name:?}"))?;
        let close = rest[open_end..]
            .find(END)
            .map(|i| open_end + i)
            .ok_or(format!("the table {name:?} has no `{END}`"))?;
        out.push_str(&rest[..open_end]);
        out.push_str("\n\n");
        out.push_str(table);
        out.push('\n');
        out.push_str(END);
        rest = &rest[close + END.len()..];
        used.push(name.to_owned());
    }
    out.push_str(rest);
    match tables.iter().find(|(n, _)| !used.iter().any(|u| u == n)) {
        Some((name, _)) => Err(format!("no `<!-- flags: {name} -->` marker")),
        None => Ok(out),
    }
}

/// Help text on one line (clap keeps a doc comment's paragraphs apart).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text that stays in its Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Arg;

    fn command() -> Command {
        Command::new("t")
            .arg(
                Arg::new("listen")
                    .long("listen")
                    .env("T_LISTEN")
                    .value_name("ADDR")
                    .default_value("0.0.0.0:1")
                    .help("Where to listen.\n\nMore | text."),
            )
            .arg(
                Arg::new("old")
                    .long("old")
                    .hide(true)
                    .action(ArgAction::SetTrue),
            )
            .arg(
                Arg::new("json")
                    .long("json")
                    .help_heading("Output")
                    .action(ArgAction::SetTrue)
                    .help("JSON."),
            )
    }

    #[test]
    fn a_table_row_per_visible_flag_under_its_heading() {
        assert_eq!(
            flag_table(&command()),
            "| flag | environment | default | meaning |\n|---|---|---|---|\n\
             | `--listen ADDR` | `T_LISTEN` | `0.0.0.0:1` | Where to listen. More \\| text. |\n\
             \nOutput:\n\n| flag | environment | default | meaning |\n|---|---|---|---|\n\
             | `--json` |  | off | JSON. |\n"
        );
    }

    #[test]
    fn every_subcommand_with_flags_of_its_own_gets_a_table() {
        let program = Command::new("p")
            .subcommand(command())
            .subcommand(Command::new("bare"))
            .subcommand(Command::new("deep").subcommand(
                Command::new("t").arg(Arg::new("x").long("x").action(ArgAction::SetTrue)),
            ))
            .subcommand(
                Command::new("hidden")
                    .hide(true)
                    .arg(Arg::new("y").long("y")),
            );
        let names: Vec<_> = flag_tables(&program).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["p t", "p deep t"]);
    }

    #[test]
    fn tables_replace_what_stands_between_their_markers() {
        let tables = [("t", "| new |\n".to_owned())];
        assert_eq!(
            with_flag_tables(
                "a\n<!-- flags: t -->\n| old |\n<!-- end flags -->\nb\n",
                &tables
            ),
            Ok("a\n<!-- flags: t -->\n\n| new |\n\n<!-- end flags -->\nb\n".to_owned())
        );
        assert!(with_flag_tables("a\n", &tables).is_err());
        assert!(with_flag_tables("<!-- flags: u -->\n<!-- end flags -->", &tables).is_err());
        assert!(with_flag_tables("<!-- flags: t -->\n", &tables).is_err());
    }
}
