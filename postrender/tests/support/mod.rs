//! Running the `styrmin-postrender` binary as Helm and users do, for the command-line tests,
//! and the rules the library's tests render with (a cluster level's answer). Each test file
//! that uses it says `mod support;`.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use styrmin_ingress_rules::{IngressTarget, LevelName, Origin, ResolvedIngress};
use styrmin_postrender::render::RenderRules;

/// A Helm 3 style document with one Ingress whose chart class is `nginx`.
pub const INGRESS: &str = "---\n# Source: web/templates/ingress.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  ingressClassName: nginx\n  rules: []\n";

/// Runs the binary with `args`, only the `STYRMIN_*` variables of `envs` (none from the
/// test's own environment), and `stdin` written to it.
pub fn run(args: &[&str], envs: &[(&str, &str)], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_styrmin-postrender"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STYRMIN_") {
            command.env_remove(key);
        }
    }
    let mut child = command
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let written = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes());
    // A run that fails on its config exits before reading stdin: the pipe is then closed.
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("wait")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn config_file(yaml: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp");
    file.write_all(yaml.as_bytes()).expect("write");
    file
}

/// The rules when the cluster level decides `target`; `strict`, R5's warning is an error.
pub fn rules_for(target: IngressTarget, strict: bool) -> RenderRules {
    RenderRules {
        resolved: ResolvedIngress {
            target,
            origin: Origin::Level(LevelName::Cluster),
        },
        kubernetes: None,
        strict,
    }
}

/// R4 with the class `c`.
pub fn class(c: &str) -> RenderRules {
    rules_for(IngressTarget::class(c), false)
}

/// R3: a dedicated controller.
pub fn dedicated() -> RenderRules {
    rules_for(IngressTarget::Dedicated, false)
}

/// R5: no class, the chart's fields as they are.
pub fn no_class() -> RenderRules {
    rules_for(IngressTarget::NoClass, false)
}
