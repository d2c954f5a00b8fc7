//! The command line.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use styrmin_ingress_rules::{EnforcementMode, IngressTarget, KubernetesVersion, Level};

use crate::config::StyrminConfig;
use crate::flux::{FluxError, FluxOutput, HelmReleaseRef};
use crate::render::RenderRules;
use crate::{explain, flux, krm, report, route};

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
                    let prefix = route::read_prefix(&mut stdin)?;
                    if krm::looks_like_resource_list(prefix.get_ref()) {
                        route::krm_function::run(
                            prefix.chain(stdin),
                            function_config(),
                            config_given,
                            report.as_ref(),
                        )
                    } else {
                        route::helm::filter(prefix.chain(stdin), &rules, mode, report.as_ref())
                    }
                }
                Some(Command::Krm) => route::krm_function::run(
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
                    route::kustomize_plugin::run(&plugin_config, report.as_ref())
                }
                Some(Command::Explain) => {
                    print!("{}", explain::explain(&config, &settings));
                    Ok(ExitCode::SUCCESS)
                }
                Some(Command::Check) => route::helm::check(&rules),
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
