//! The command line.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use styrmin_ingress_rules::{
    EnforcementMode, IngressTarget, KubernetesVersion, Level, ResolvedMode,
};

use crate::config::StyrminConfig;
use crate::flux::{FluxError, FluxOutput, HelmReleaseRef};
use crate::render::RenderRules;
use crate::{check, explain, flux, krm, report, streaming};

/// Gives every Ingress of a rendered Helm chart the ingress class Styrmin's rules decide.
///
/// With no subcommand it reads the rendered stream on stdin and writes it to stdout,
/// rewriting only the class of each Ingress (networking.k8s.io/v1, v1beta1,
/// extensions/v1beta1; in the parent chart, every subchart and List items). Every other
/// byte comes out as it went in. On any error it writes nothing to stdout and exits 1.
///
/// Helm 3:  helm install web ./chart --post-renderer styrmin-postrender --post-renderer-args --config=styrmin.yaml
/// Helm 4:  helm plugin install ./postrender/helm-plugin && helm install web ./chart --post-renderer styrmin --post-renderer-args --config=styrmin.yaml
#[derive(Debug, Parser)]
#[command(name = "styrmin-postrender", version, verbatim_doc_comment)]
pub struct Cli {
    /// Config file: YAML with up to three sections, `cluster:`, `environment:` and
    /// `deployment:`, each with `ingress_class` and `dedicated_ingress` as in the Styrmin
    /// config. Without it: cluster defaults (class "traefik").
    #[arg(long, env = "STYRMIN_CONFIG", global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Shortcut for `deployment: {ingress_class: CLASS}` (overrides the file's deployment
    /// value). "" means no class: Ingresses keep the chart's class.
    #[arg(
        long,
        env = "STYRMIN_INGRESS_CLASS",
        global = true,
        value_name = "CLASS"
    )]
    ingress_class: Option<String>,

    /// Shortcut for `deployment: {dedicated_ingress: {}}`: serve every Ingress by the
    /// environment's dedicated controller.
    #[arg(long, env = "STYRMIN_DEDICATED_INGRESS", global = true)]
    dedicated_ingress: bool,

    /// The ingress settings the deployment was last deployed with (rule W5): `dedicated`,
    /// `class:<name>` or `no-class`. When given (here or as the config's `last_deployed:`
    /// section) it decides alone, whatever the levels say: an application stays on its
    /// current ingress until Styrmin redeploys it.
    #[arg(
        long,
        env = "STYRMIN_LAST_DEPLOYED",
        global = true,
        value_name = "SETTINGS"
    )]
    last_deployed: Option<IngressTarget>,

    /// The cluster's Kubernetes version (e.g. 1.30). Below 1.27 an Ingress may not set both
    /// the class annotation and spec.ingressClassName, so a shared class is an error there.
    #[arg(
        long,
        env = "STYRMIN_KUBE_VERSION",
        global = true,
        value_name = "VERSION"
    )]
    kube_version: Option<KubernetesVersion>,

    /// Also write warnings, changes and errors to FILE (Helm 4 hides a post-renderer's stderr).
    /// Each run appends to FILE, so two calls for one release both stay in it.
    #[arg(long, env = "STYRMIN_REPORT", global = true, value_name = "FILE")]
    report: Option<PathBuf>,

    /// Shortcut for `deployment: {enforcement_mode: MODE}`. `warn`: the stream passes
    /// byte for byte; what `enforce` would change goes to stderr and `--report`.
    #[arg(
        long,
        env = "STYRMIN_ENFORCEMENT_MODE",
        global = true,
        value_name = "MODE"
    )]
    enforcement_mode: Option<EnforcementMode>,

    /// Fail when an Ingress is left with no class (R5) instead of warning; in `warn` mode,
    /// also fail when enforcing would change an Ingress (a CI gate).
    #[arg(long, env = "STYRMIN_STRICT", global = true)]
    strict: bool,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print which class or dedicated ingress the config gives, and which level (or the
    /// last-deployed record) decided it.
    Explain,
    /// Read a rendered stream on stdin; print a diff of what would change. Exit 0 when
    /// every Ingress conforms, 1 when some would change, 2 on error.
    Check,
    /// Print the FluxCD HelmRelease post-renderer (a kustomize strategic-merge patch of
    /// every Ingress of the release) that applies the rules: R3 with a dedicated ingress,
    /// R4 with a shared class. When the resolved class is empty (R5: keep the chart's
    /// class) there is nothing to patch: prints nothing, says why on stderr, exits 3.
    /// Other errors exit 1.
    Flux {
        /// What to print.
        #[arg(
            long,
            env = "STYRMIN_FLUX_OUTPUT",
            value_enum,
            default_value = "post-renderers"
        )]
        output: FluxOutput,
        /// metadata.name of the HelmRelease (needed by --output helmrelease-patch; with
        /// --output component, patch only this one).
        #[arg(long, env = "STYRMIN_FLUX_NAME", value_name = "NAME")]
        name: Option<String>,
        /// metadata.namespace of the HelmRelease (optional).
        #[arg(long, env = "STYRMIN_FLUX_NAMESPACE", value_name = "NAMESPACE")]
        namespace: Option<String>,
    },
    /// Run as a KRM function (kustomize `transformers:` with `--enable-exec`, kpt): read a
    /// ResourceList on stdin, write it to stdout with every Ingress item edited as the
    /// filter edits a stream, and R5 warnings in `results`. The config is the
    /// functionConfig (kind StyrminPostRender, docs/kustomize-argocd.md), else the flags.
    /// A refusal writes only `results` and exits 1. Without a subcommand, an input that
    /// starts with `apiVersion: config.kubernetes.io/v1` and `kind: ResourceList` is read
    /// this way too (kustomize runs an exec function with no arguments).
    Krm,
    /// Run as a kustomize exec plugin (`kubectl kustomize --enable-alpha-plugins`, whose
    /// built-in kustomize runs no KRM exec functions): CONFIG is the plugin's config file as
    /// kustomize passes it (kind StyrminPostRender, the functionConfig's kind), stdin the
    /// resources as a YAML stream, stdout the same stream with every Ingress edited as the
    /// filter edits it. Installed as a link named StyrminPostRender in
    /// $XDG_CONFIG_HOME/kustomize/plugin/styrmin.io/v1alpha1/styrminpostrender/; run under
    /// that name, the program takes this subcommand (docs/kustomize-argocd.md).
    KustomizePlugin {
        /// The plugin's config file.
        #[arg(value_name = "CONFIG")]
        plugin_config: PathBuf,
    },
}

/// The name kustomize runs an exec plugin by: its kind.
pub const KUSTOMIZE_PLUGIN_NAME: &str = "StyrminPostRender";

/// The program's arguments; run as the kustomize exec plugin (by its name), with the
/// plugin's subcommand put first.
pub fn arguments() -> Vec<std::ffi::OsString> {
    let mut args: Vec<_> = std::env::args_os().collect();
    let as_plugin = args.first().is_some_and(|program| {
        std::path::Path::new(program).file_name() == Some(KUSTOMIZE_PLUGIN_NAME.as_ref())
    });
    if as_plugin {
        args.insert(1, "kustomize-plugin".into());
    }
    args
}

/// `styrmin-postrender flux`'s exit code when there is no post-renderer to print (R5).
pub const FLUX_NO_CLASS_EXIT: u8 = 3;

impl Cli {
    /// Runs the command on a thread with the rendering stack
    /// ([`crate::streaming::with_render_stack`]).
    pub fn run(self) -> ExitCode {
        crate::streaming::with_render_stack(move || self.run_here())
    }

    fn run_here(self) -> ExitCode {
        let Self {
            config,
            ingress_class,
            dedicated_ingress,
            last_deployed,
            kube_version,
            report,
            enforcement_mode,
            strict,
            command,
        } = self;
        // `check` keeps exit 1 for "would change", so its errors exit 2.
        let error_code = if matches!(command, Some(Command::Check)) {
            2
        } else {
            1
        };
        let config_given = config.is_some()
            || ingress_class.is_some()
            || dedicated_ingress
            || last_deployed.is_some()
            || kube_version.is_some()
            || enforcement_mode.is_some()
            || strict;
        let outcome = (|| -> anyhow::Result<ExitCode> {
            let config = match &config {
                Some(path) => StyrminConfig::from_file(path)?,
                None => StyrminConfig::default(),
            }
            .with_deployment_overrides(ingress_class, dedicated_ingress)
            .with_last_deployed(last_deployed)
            .with_enforcement_mode(enforcement_mode);
            let default_cluster = Level::default();
            let settings = config.settings(&default_cluster);
            let mode = config.mode(&default_cluster);
            let rules = RenderRules {
                resolved: settings.resolved.clone(),
                kubernetes: kube_version,
                strict,
            };
            let function_config = || krm::FunctionConfig {
                config: config.clone(),
                kubernetes: kube_version,
                strict,
            };
            match command {
                None => {
                    let mut stdin = std::io::stdin().lock();
                    let prefix = read_prefix(&mut stdin)?;
                    if krm::looks_like_resource_list(prefix.get_ref()) {
                        run_krm(
                            prefix.chain(stdin),
                            function_config(),
                            config_given,
                            report.as_ref(),
                        )
                    } else {
                        filter(prefix.chain(stdin), &rules, mode, report.as_ref())
                    }
                }
                Some(Command::Krm) => run_krm(
                    std::io::stdin().lock(),
                    function_config(),
                    config_given,
                    report.as_ref(),
                ),
                Some(Command::KustomizePlugin { plugin_config }) => {
                    if config_given {
                        anyhow::bail!(
                            "the plugin config {} and --config, --ingress-class, --dedicated-ingress, --last-deployed, --kube-version or --strict (or their STYRMIN_ variables) were both given: the plugin config is the whole configuration",
                            plugin_config.display()
                        );
                    }
                    let text = std::fs::read_to_string(&plugin_config).with_context(|| {
                        format!("cannot read the plugin config {}", plugin_config.display())
                    })?;
                    let plugin = krm::read_plugin_config(&text)
                        .with_context(|| format!("plugin config {}", plugin_config.display()))?;
                    let rules = RenderRules {
                        resolved: plugin.config.settings(&default_cluster).resolved,
                        kubernetes: plugin.kubernetes,
                        strict: plugin.strict,
                    };
                    // The plugin filters a stream, so warn works as for Helm.
                    let mode = plugin.config.mode(&default_cluster);
                    filter(std::io::stdin().lock(), &rules, mode, report.as_ref())
                }
                Some(Command::Explain) => {
                    print!("{}", explain::explain(&config, &settings));
                    Ok(ExitCode::SUCCESS)
                }
                Some(Command::Check) => check(&rules),
                Some(Command::Flux {
                    output,
                    name,
                    namespace,
                }) => {
                    if mode.mode.is_warn() {
                        anyhow::bail!(
                            "enforcement_mode warn (decided by {}): a Flux post-renderer is a kustomize patch that always applies, \
                             so there is none to print in warn mode; run `styrmin-postrender check` on the rendered stream instead",
                            mode.decided_by()
                        );
                    }
                    print_flux(&rules, output, &HelmReleaseRef { name, namespace })
                }
            }
        })();
        match outcome {
            Ok(code) => code,
            Err(error) => {
                let message = format!("styrmin-postrender: error: {error:#}");
                eprintln!("{message}");
                if let Some(path) = &report {
                    let _ = report::append(path, &format!("error: {error:#}\n"));
                }
                ExitCode::from(error_code)
            }
        }
    }
}

/// The first bytes of the input (up to a few hundred, fewer at its end), to tell a
/// ResourceList from a rendered stream; the rest is read after them.
fn read_prefix(input: &mut impl Read) -> anyhow::Result<std::io::Cursor<Vec<u8>>> {
    let mut prefix = Vec::with_capacity(PREFIX_BYTES);
    input
        .take(PREFIX_BYTES as u64)
        .read_to_end(&mut prefix)
        .context("reading the rendered stream from stdin")?;
    Ok(std::io::Cursor::new(prefix))
}

const PREFIX_BYTES: usize = 512;

const KRM_INPUT_RESERVE: usize = 64 << 20;

fn run_krm(
    input: impl Read,
    fallback: krm::FunctionConfig,
    fallback_given: bool,
    report_path: Option<&PathBuf>,
) -> anyhow::Result<ExitCode> {
    // Room for most ResourceLists at once: reading a long one into a growing buffer copies
    // it again at every doubling (pages not written to are never touched).
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

fn filter(
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
    if mode.mode.is_warn() {
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
        if let Some((path, file)) = &mut report_file {
            file.write_all(lines.as_bytes())
                .and_then(|()| file.sync_data())
                .with_context(|| format!("cannot write the report {}", path.display()))?;
        }
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        stream
            .write(&mut out)
            .and_then(|()| out.flush())
            .context("writing the stream to stdout")?;
        eprint!("{would}");
        eprint!("{}", report::warnings(rendered));
        return Ok(ExitCode::SUCCESS);
    }
    let rendered = &stream.rendered;
    if let Some((path, file)) = &mut report_file {
        file.write_all(report::success(rendered).as_bytes())
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
    eprint!("{}", report::warnings(rendered));
    Ok(ExitCode::SUCCESS)
}

fn print_flux(
    rules: &RenderRules,
    output: FluxOutput,
    release: &HelmReleaseRef,
) -> anyhow::Result<ExitCode> {
    let renderer = match flux::generate(&rules.resolved, rules.kubernetes) {
        Ok(renderer) => renderer,
        Err(error @ FluxError::NoClass { .. }) => {
            eprintln!("styrmin-postrender flux: {error}");
            return Ok(ExitCode::from(FLUX_NO_CLASS_EXIT));
        }
        Err(error) => return Err(error.into()),
    };
    print!(
        "{}",
        flux::render(&renderer, &rules.resolved, output, release)?
    );
    Ok(ExitCode::SUCCESS)
}

fn check(rules: &RenderRules) -> anyhow::Result<ExitCode> {
    // The same pipeline as the filter, diffed instead of written.
    let stream = streaming::render_stream(std::io::stdin().lock(), rules, streaming::BLOCK_BYTES)?;
    let diff = check::diff(&stream);
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
