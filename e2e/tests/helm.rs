//! The post-renderer end to end, under real Helm: Helm 3.17 runs the binary itself
//! (`--post-renderer <path>`), Helm 4.2 runs it through the `styrmin` plugin
//! (`helm plugin install ./postrender/helm-plugin`, `--post-renderer styrmin`); the oldest
//! supported Helm 4, 4.1 (`helm4.1`), runs the smoke case of `helm4_plugin_template`. The
//! inputs are the test chart `e2e/tests/data/charts/styrmin-e2e` (see its README) and the real
//! streams Helm writes to post-renderers, in `postrender/tests/data/rendered/`.
//!
//! Every run is compared with the same render without the post-renderer:
//! - every Ingress (networking.k8s.io/v1, v1beta1, extensions/v1beta1; List items; with
//!   Helm 4 also hooks) has the class fields of the rule for the config (R3, R4, R5), and
//!   nothing else of it changed;
//! - every other document is byte-identical (the binary's own output, Helm 3) or, where
//!   Helm 4 re-formats, semantically identical (R7);
//! - Helm 3 keeps its `# Source:` lines; Helm 4 gets back the
//!   `postrenderer.helm.sh/postrender-filename` annotation (it maps documents to templates
//!   by it);
//! - warnings (R5) are reported, one per Ingress left without a class.
//!
//! Both Helm versions discard a post-renderer's stderr when it succeeds
//! (`docs/helm.md`), so the warnings are read from `--report`.
//! No cluster is used: `helm template` and `helm install --dry-run=client` run without one
//! in Helm 4; Helm 3's `helm install --dry-run` needs a reachable API server even on the
//! client side, so it talks to [`FakeApiServer`] (discovery only, every object 404).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rstest::rstest;
use serde_json::Value;
use styrmin_e2e::{
    HelmHome, Scratch, data, get, get_str, postrender_data, release_binary, run_fails, run_ok,
    split_documents, utf8, workspace_root,
};
use styrmin_fake_apiserver::FakeApiServer;

const INGRESS_API_VERSIONS: [&str; 3] = [
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "extensions/v1beta1",
];
const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const FILENAME_ANNOTATION: &str = "postrenderer.helm.sh/postrender-filename";
const HOOK_ANNOTATION: &str = "helm.sh/hook";
const RELEASE: &str = "web";
const NAMESPACE: &str = "apps";

/// What the rules must do to every Ingress for a config.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// R3: no `spec.ingressClassName`, annotation `traefik`.
    Dedicated,
    /// R4: both fields this class.
    Class(&'static str),
    /// R5: both fields as the chart had them.
    Keep,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    config: &'static str,
    expect: Expect,
}

const DEDICATED: Case = Case {
    name: "dedicated",
    config: "cluster:\n  dedicated_ingress: {}\n",
    expect: Expect::Dedicated,
};
const CLASS: Case = Case {
    name: "class",
    config: "environment:\n  ingress_class: nginx\n",
    expect: Expect::Class("nginx"),
};
const EMPTY: Case = Case {
    name: "empty",
    config: "cluster:\n  ingress_class: null\n",
    expect: Expect::Keep,
};
/// R2: the most specific level wins; the class is a YAML 1.1 boolean word, so it only
/// survives as the string "on" if it is written quoted.
const LEVELS: Case = Case {
    name: "levels",
    config: "cluster:\n  ingress_class: traefik\nenvironment:\n  ingress_class: nginx\ndeployment:\n  ingress_class: \"on\"\n",
    expect: Expect::Class("on"),
};
/// R1/R3: a dedicated ingress at the cluster wins over a class at the environment.
const DEDICATED_WINS: Case = Case {
    name: "dedicated-wins",
    config: "cluster:\n  dedicated_ingress: {}\nenvironment:\n  ingress_class: nginx\n",
    expect: Expect::Dedicated,
};

/// The test chart's Ingresses (release `web`), by name: apiVersion and whether it is a hook.
const CHART_INGRESSES: [(&str, &str, bool); 7] = [
    ("web-class-only", "networking.k8s.io/v1", false),
    ("web-both", "networking.k8s.io/v1", false),
    ("web-list-item", "networking.k8s.io/v1", false),
    ("web-hook", "networking.k8s.io/v1", true),
    ("web-child-v1beta1", "networking.k8s.io/v1beta1", false),
    ("web-child-none", "networking.k8s.io/v1", false),
    ("web-grandchild-legacy", "extensions/v1beta1", false),
];

// ---------------------------------------------------------------------------------------
// Helm 3

/// The flags instead of a config file, passed the way users pass them.
#[test]
fn helm3_template_flags_instead_of_config() {
    let home = HelmHome::new("h3-flags");
    let baseline = helm3_render(&home, &[]);
    for (args, expect) in [
        (&["--ingress-class=nginx"][..], Expect::Class("nginx")),
        (&["--dedicated-ingress"][..], Expect::Dedicated),
    ] {
        // A report per run: each run appends to its report.
        let report = home.scratch().join(&format!("report{}.txt", args[0]));
        let mut pr_args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        pr_args.push(format!("--report={}", report.display()));
        let rendered = helm3_render(&home, &post_renderer_args(postrender_path(), &pr_args));
        let seen = compare_streams(&baseline, &rendered, Compare::Bytes, expect, false);
        assert_chart_coverage(&seen, false);
        assert_warnings(&read(&report), &seen, expect, "helm3 with flags");
    }
}

/// A config error: Helm 3 fails and shows the post-renderer's message (it shows stderr
/// only on failure), and prints no manifests.
#[test]
fn helm3_template_bad_config_fails_with_the_error() {
    let home = HelmHome::new("h3-bad");
    let config = home
        .scratch()
        .write("styrmin.yaml", "cluster:\n  dedicated_ingress: true\n");
    let mut cmd = home.helm("helm3");
    cmd.args(template_args()).args(post_renderer_args(
        postrender_path(),
        &[format!("--config={}", config.display())],
    ));
    run_fails(
        &mut cmd,
        "a non-object dedicated_ingress",
        &["dedicated_ingress"],
    );
}

/// `helm install --dry-run`: Helm 3 needs a reachable API server even for a client-side
/// dry run, so it gets a stand-in that serves discovery only (every object 404). Both the
/// plain `--dry-run` and `--dry-run=client`; hooks are in the output but never post-rendered.
#[test]
fn helm3_install_dry_run_against_fake_api_server() {
    let server = FakeApiServer::with_discovery();
    for (case, dry_run) in [
        (CLASS, "--dry-run"),
        (DEDICATED, "--dry-run=client"),
        (EMPTY, "--dry-run"),
    ] {
        let home = HelmHome::new(&format!("h3-install-{}", case.name));
        let kubeconfig = home.scratch().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig, Some(NAMESPACE));
        let config = home.scratch().write("styrmin.yaml", case.config);
        let report = home.scratch().join("report.txt");
        let install = |extra: &[String]| {
            let mut cmd = home.helm("helm3");
            cmd.env("KUBECONFIG", &kubeconfig)
                .args(["install", RELEASE])
                .arg(data("charts/styrmin-e2e"))
                .args([dry_run, "--disable-openapi-validation"])
                .args(extra);
            install_manifests(&utf8(run_ok(&mut cmd, None).stdout, "helm3 install output"))
        };
        let baseline = install(&[]);
        let rendered = install(&post_renderer_args(
            postrender_path(),
            &[
                format!("--config={}", config.display()),
                format!("--report={}", report.display()),
            ],
        ));
        let seen = compare_streams(&baseline, &rendered, Compare::Bytes, case.expect, false);
        assert_chart_coverage(&seen, false);
        assert_ingressroute_untouched(&rendered);
        assert_warnings(
            &read(&report),
            &seen,
            case.expect,
            &format!("helm3 install {dry_run} {}", case.name),
        );
    }
    server.assert_dry_run(
        |path| path.starts_with("/apis/networking.k8s.io/v1/namespaces/apps/ingresses/web-both"),
        "helm3 install did not look for the Ingresses: did it reach the fake API server?",
    );
}

/// `helm template` with the post-renderer, for each config, against the same render without.
#[rstest]
#[case::dedicated(DEDICATED)]
#[case::class(CLASS)]
#[case::empty_class_keeps_chart_and_warns(EMPTY)]
#[case::most_specific_level_and_quoted_class(LEVELS)]
#[case::dedicated_wins_over_class(DEDICATED_WINS)]
fn helm3_template(#[case] case: Case) {
    let home = HelmHome::new(&format!("h3-{}", case.name));
    let config = home.scratch().write("styrmin.yaml", case.config);
    let report = home.scratch().join("report.txt");
    let baseline = helm3_render(&home, &[]);
    let args = post_renderer_args(
        postrender_path(),
        &[
            format!("--config={}", config.display()),
            format!("--report={}", report.display()),
        ],
    );
    let rendered = helm3_render(&home, &args);
    // Helm 3 prints the post-renderer's stdout as it is, then the hooks, which it never
    // gives to a post-renderer: every byte outside the class fields must be the chart's.
    let seen = compare_streams(&baseline, &rendered, Compare::Bytes, case.expect, false);
    assert_chart_coverage(&seen, false);
    assert_ingressroute_untouched(&rendered);
    assert_warnings(
        &read(&report),
        &seen,
        case.expect,
        &format!("helm3 {}", case.name),
    );
}

fn helm3_render(home: &HelmHome, extra: &[String]) -> String {
    let mut cmd = home.helm("helm3");
    cmd.args(template_args()).args(extra);
    utf8(run_ok(&mut cmd, None).stdout, "helm3 output")
}

// ---------------------------------------------------------------------------------------
// Helm 4

/// `helm install --dry-run=client`: the install path, hooks and all, without a cluster.
#[test]
fn helm4_plugin_install_dry_run_client() {
    for case in [CLASS, DEDICATED] {
        let home = helm4_home_with_plugin("helm4", &format!("h4-install-{}", case.name));
        let config = home.scratch().write("styrmin.yaml", case.config);
        let report = home.scratch().join("report.txt");
        let install = |extra: &[String]| {
            let mut cmd = home.helm("helm4");
            cmd.args(["install", RELEASE])
                .arg(data("charts/styrmin-e2e"))
                .args(["--namespace", NAMESPACE, "--dry-run=client"])
                .args(extra);
            install_manifests(&utf8(run_ok(&mut cmd, None).stdout, "helm4 install output"))
        };
        let baseline = install(&[]);
        let rendered = install(&post_renderer_args(
            "styrmin",
            &[
                format!("--config={}", config.display()),
                format!("--report={}", report.display()),
            ],
        ));
        let seen = compare_streams(&baseline, &rendered, Compare::Semantic, case.expect, true);
        assert_chart_coverage(&seen, true);
        assert_ingressroute_untouched(&rendered);
        assert_warnings(
            &read(&report),
            &seen,
            case.expect,
            &format!("helm4 install {}", case.name),
        );
    }
}

/// A config error: Helm 4 fails (it hides the message: the report file has it).
#[test]
fn helm4_plugin_bad_config_fails_and_reports() {
    let home = helm4_home_with_plugin("helm4", "h4-bad");
    let config = home
        .scratch()
        .write("styrmin.yaml", "cluster:\n  dedicated_ingress: true\n");
    let report = home.scratch().join("report.txt");
    let mut cmd = home.helm("helm4");
    cmd.args(template_args()).args(post_renderer_args(
        "styrmin",
        &[
            format!("--config={}", config.display()),
            format!("--report={}", report.display()),
        ],
    ));
    run_fails(&mut cmd, "a non-object dedicated_ingress", &[]);
    let report = read(&report);
    assert!(
        report.lines().any(|l| l.contains("dedicated_ingress")),
        "the report does not name the key dedicated_ingress:\n{report}"
    );
}

/// `helm template` through the `styrmin` plugin, for each config, against the same render
/// without.
/// The newest Helm 4 runs every case; the oldest supported one (4.1) the smoke case.
#[rstest]
#[case::dedicated("helm4", DEDICATED)]
#[case::class("helm4", CLASS)]
#[case::empty_class_keeps_chart_and_warns("helm4", EMPTY)]
#[case::most_specific_level_and_quoted_class("helm4", LEVELS)]
#[case::oldest_helm4_1_class("helm4.1", CLASS)]
fn helm4_plugin_template(#[case] helm: &str, #[case] case: Case) {
    let home = helm4_home_with_plugin(helm, &format!("{helm}-{}", case.name));
    let config = home.scratch().write("styrmin.yaml", case.config);
    let report = home.scratch().join("report.txt");
    let render = |extra: &[String]| {
        let mut cmd = home.helm(helm);
        cmd.args(template_args()).args(extra);
        utf8(run_ok(&mut cmd, None).stdout, "helm4 output")
    };
    let baseline = render(&[]);
    let rendered = render(&post_renderer_args(
        "styrmin",
        &[
            format!("--config={}", config.display()),
            format!("--report={}", report.display()),
        ],
    ));
    // Helm 4 re-formats the documents and maps them back to their templates by the
    // postrender-filename annotation, printing `# Source:` from it: documents are matched by
    // source, kind and name, so a lost annotation shows as a document without a match.
    let seen = compare_streams(&baseline, &rendered, Compare::Semantic, case.expect, true);
    assert_chart_coverage(&seen, true);
    assert_ingressroute_untouched(&rendered);
    assert!(
        !rendered.contains("generated-by-postrender"),
        "Helm 4 could not map some documents back to their templates: the post-renderer \
         lost the {FILENAME_ANNOTATION} annotation\n{rendered}"
    );
    assert_warnings(
        &read(&report),
        &seen,
        case.expect,
        &format!("{helm} {}", case.name),
    );
}

/// Helm 4.2's `separate` PostRenderStrategy, which SDK callers such as a controller choose:
/// the post-renderer runs twice for one release with the same arguments, on the manifests and
/// then on the hooks. Helm's command line has no flag for it, so the test takes what Helm 4
/// hands a post-renderer (recorded by a plugin that copies its stdin), splits it into the
/// manifests and the hooks, and runs the `styrmin` plugin's command on each in that order.
/// Both calls' lines stay in the one `--report` file, each ending with its summary.
#[test]
fn helm4_separate_strategy_keeps_both_calls_in_the_report() {
    let home = helm4_home_with_plugin("helm4", "h4-separate");
    let recorder = home.scratch().join("recorder");
    std::fs::create_dir_all(&recorder).expect("recorder dir");
    std::fs::write(
        recorder.join("plugin.yaml"),
        "apiVersion: v1\nname: recorder\ntype: postrenderer/v1\nruntime: subprocess\nversion: 0.1.0\nruntimeConfig:\n  platformCommand:\n    - os: linux\n      command: ${HELM_PLUGIN_DIR}/record.sh\n",
    )
    .expect("recorder plugin.yaml");
    let script = recorder.join("record.sh");
    std::fs::write(&script, "#!/bin/sh\nexec tee \"$1\"\n").expect("record.sh");
    let mut permissions = std::fs::metadata(&script).expect("record.sh").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).expect("chmod record.sh");
    let mut cmd = home.helm("helm4");
    cmd.args(["plugin", "install"]).arg(&recorder);
    run_ok(&mut cmd, None);
    let recorded = home.scratch().join("postrenderer-stdin.yaml");
    let mut cmd = home.helm("helm4");
    cmd.args(template_args()).args(post_renderer_args(
        "recorder",
        &[recorded.display().to_string()],
    ));
    run_ok(&mut cmd, None);
    let combined = read(&recorded);

    let (mut manifests, mut hooks) = (String::new(), String::new());
    for doc in split_documents(&combined) {
        let part = if doc.value()["metadata"]["annotations"][HOOK_ANNOTATION].is_string() {
            &mut hooks
        } else {
            &mut manifests
        };
        part.push_str("---\n");
        part.push_str(&doc.text);
    }
    assert!(
        hooks.contains("name: web-hook") && manifests.contains("name: web-both"),
        "the recorded stream has no hook Ingress or no other Ingress:\n{combined}"
    );

    let config = home.scratch().write("styrmin.yaml", CLASS.config);
    let command = workspace_root().join("postrender/helm-plugin/styrmin-postrender.sh");
    let call = |stream: &str, report: &Path| {
        // The Helm home's environment (no STYRMIN_ variables, the release build on PATH), as
        // Helm runs the plugin's command.
        let helm = home.helm("helm4");
        let mut plugin = std::process::Command::new(&command);
        for (key, value) in helm.get_envs() {
            match value {
                Some(value) => plugin.env(key, value),
                None => plugin.env_remove(key),
            };
        }
        plugin
            .arg(format!("--config={}", config.display()))
            .arg(format!("--report={}", report.display()));
        utf8(
            run_ok(&mut plugin, Some(stream.as_bytes())).stdout,
            "styrmin plugin output",
        )
    };
    let report = home.scratch().join("report.txt");
    let rendered = format!("{}{}", call(&manifests, &report), call(&hooks, &report));
    let seen = compare_streams(
        &format!("{manifests}{hooks}"),
        &rendered,
        Compare::Bytes,
        CLASS.expect,
        true,
    );
    // Helm 4 hands a post-renderer a List's items as documents of their own: every Ingress of
    // the chart, the hook's too, went through the rules in one of the two calls.
    let chart: BTreeMap<String, String> = CHART_INGRESSES
        .iter()
        .map(|(name, api, _)| (name.to_string(), api.to_string()))
        .collect();
    assert_eq!(seen.rendered, chart, "the Ingresses the rules applied to");

    // The same two calls, each with a report of its own: the shared report is both, in order.
    let alone = |stream: &str, name: &str| {
        let report = home.scratch().join(name);
        call(stream, &report);
        read(&report)
    };
    let (first, second) = (
        alone(&manifests, "manifests.txt"),
        alone(&hooks, "hooks.txt"),
    );
    assert!(
        second.contains("Ingress web-hook")
            && second.ends_with("1 Ingresses, 1 changed, 0 warnings\n"),
        "the hooks' report:\n{second}"
    );
    assert_eq!(read(&report), format!("{first}{second}"));
}

/// A Helm home with `helm4 plugin install ./postrender/helm-plugin` done in it.
fn helm4_home_with_plugin(helm: &str, label: &str) -> HelmHome {
    let home = HelmHome::new(label);
    let plugin_dir = workspace_root().join("postrender").join("helm-plugin");
    let mut cmd = home.helm(helm);
    cmd.args(["plugin", "install"]).arg(&plugin_dir);
    run_ok(&mut cmd, None);
    // A directory is symlinked, under HELM_DATA_HOME (not HELM_PLUGINS).
    let link = home.data_home().join("plugins").join("helm-plugin");
    let target = std::fs::read_link(&link).unwrap_or_else(|e| {
        panic!(
            "helm4 plugin install made no symlink {}: {e}",
            link.display()
        )
    });
    assert_eq!(target, plugin_dir, "{} points elsewhere", link.display());
    let mut cmd = home.helm(helm);
    cmd.args(["plugin", "list"]);
    let list = utf8(run_ok(&mut cmd, None).stdout, "helm4 plugin list");
    assert!(
        list.lines()
            .any(|l| l.starts_with("styrmin") && l.contains("postrenderer/v1")),
        "helm4 plugin list does not show the styrmin postrenderer/v1 plugin:\n{list}"
    );
    // The plugin's wrapper finds the binary on PATH (HelmHome puts target/release first).
    postrender_path();
    home
}

/// The documents of `helm install --dry-run` output: its `HOOKS:` and `MANIFEST:` sections.
fn install_manifests(output: &str) -> String {
    let hooks = output
        .split_once("\nHOOKS:\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no HOOKS: section in helm install output:\n{output}"));
    let (hooks, manifest) = hooks
        .split_once("\nMANIFEST:\n")
        .unwrap_or_else(|| panic!("no MANIFEST: section in helm install output:\n{output}"));
    let manifest = manifest
        .split_once("\nNOTES:\n")
        .map_or(manifest, |(m, _)| m);
    format!("{hooks}\n---\n{manifest}")
}

// ---------------------------------------------------------------------------------------
// The real rendered streams, fed to the binary exactly as Helm would

/// `<name>`, Ingresses in what Helm 3 gives a post-renderer, in what Helm 4 gives.
const FIXTURES: [(&str, usize, usize); 8] = [
    ("eck-stack", 2, 2),
    ("grafana", 1, 1),
    ("grafana-kube1.18", 1, 1),
    ("podinfo", 1, 1),
    ("podinfo-legacy", 1, 1),
    ("traefik", 1, 1),
    ("umbrella-mix", 5, 6),
    ("vault", 1, 1),
];

#[test]
fn rendered_helm3_streams() {
    rendered_streams("helm3", 1);
}

#[test]
fn rendered_helm4_streams() {
    rendered_streams("helm4", 2);
}

fn rendered_streams(helm: &str, column: usize) {
    let scratch = Scratch::new(&format!("rendered-{helm}"));
    for (name, helm3_count, helm4_count) in FIXTURES {
        let expected = if column == 1 {
            helm3_count
        } else {
            helm4_count
        };
        let path = postrender_data(&format!("rendered/{name}.{helm}-postrenderer-stdin.yaml"));
        let input = read(&path);
        for case in [DEDICATED, CLASS, EMPTY, LEVELS, DEDICATED_WINS] {
            let context = format!("{} with config {}", path.display(), case.name);
            let config = scratch.write("styrmin.yaml", case.config);
            // A report per run: each run appends to its report.
            let report = scratch.join(&format!("report-{name}-{}.txt", case.name));
            let mut cmd = std::process::Command::new(postrender_path());
            cmd.arg(format!("--config={}", config.display()))
                .arg(format!("--report={}", report.display()));
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("STYRMIN_") {
                    cmd.env_remove(key);
                }
            }
            let output = run_ok(&mut cmd, Some(input.as_bytes()));
            let rendered = utf8(output.stdout, "styrmin-postrender output");
            let stderr = utf8(output.stderr, "styrmin-postrender stderr");

            // Hooks are in Helm 4's stream, and Helm 4 post-renders them.
            let seen = compare_streams(&input, &rendered, Compare::Bytes, case.expect, true);
            assert_eq!(
                seen.rendered.len(),
                expected,
                "{context}: Ingresses found: {:?}",
                seen.rendered
            );
            let report = read(&report);
            assert_warnings(&report, &seen, case.expect, &context);
            assert_eq!(
                warning_lines(&stderr),
                warning_lines(&report),
                "{context}: stderr and the report disagree on the warnings"
            );
            if helm == "helm3" {
                assert_eq!(
                    sources(&input),
                    sources(&rendered),
                    "{context}: the # Source: lines changed"
                );
            } else {
                assert_eq!(
                    filename_annotations(&input),
                    filename_annotations(&rendered),
                    "{context}: the {FILENAME_ANNOTATION} annotations changed"
                );
            }
            if name == "traefik" {
                assert_ingressroute_untouched(&rendered);
            }

            // R8: the rules applied to their own output change nothing.
            let again = run_ok(&mut cmd, Some(rendered.as_bytes()));
            assert!(
                again.stdout == rendered.as_bytes(),
                "{context}: a second run changed the output (R8)"
            );
        }
    }
}

fn sources(stream: &str) -> Vec<String> {
    stream
        .lines()
        .filter(|l| l.starts_with("# Source: "))
        .map(str::to_owned)
        .collect()
}

fn filename_annotations(stream: &str) -> Vec<String> {
    split_documents(stream)
        .iter()
        .map(|doc| {
            get_str(
                &doc.value(),
                &["metadata", "annotations", FILENAME_ANNOTATION],
            )
            .to_owned()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Comparing a render with the same render through the post-renderer

#[derive(Debug, Clone, Copy, PartialEq)]
enum Compare {
    /// Documents in the same order; outside an Ingress's class fields, the same bytes.
    Bytes,
    /// Documents matched by `# Source:`, kind, namespace and name; the same values.
    Semantic,
}

/// What a comparison went through.
#[derive(Debug, Default)]
struct Seen {
    /// Ingresses the rules applied to: name → apiVersion.
    rendered: BTreeMap<String, String>,
    /// Ingresses found as items of a List.
    in_lists: BTreeSet<String>,
    /// Hook Ingresses that were not post-rendered (Helm 3).
    hooks_untouched: BTreeSet<String>,
    /// Ingresses the rules applied to that had neither class field in the chart.
    classless: BTreeSet<String>,
    /// Documents that are not Ingresses and did not change.
    others: usize,
}

/// The documents of `before` and `after`, paired: in order (bytes), or by their key
/// (semantic); none lost, none added.
fn paired(before: &str, after: &str, compare: Compare) -> Vec<(Entry, Entry)> {
    // Helm 4 flattens a List into its items before the post-renderer sees it, so in its
    // output the items are documents of their own: compare item by item.
    let flatten = compare == Compare::Semantic;
    let before_entries = entries(before, flatten);
    let after_entries = entries(after, flatten);
    match compare {
        Compare::Bytes => {
            assert_eq!(
                before_entries.len(),
                after_entries.len(),
                "the number of documents changed\n--- output ---\n{after}"
            );
            before_entries.into_iter().zip(after_entries).collect()
        }
        Compare::Semantic => {
            let mut after_by_key = keyed(after_entries, "output");
            let before_by_key = keyed(before_entries, "render without post-renderer");
            let pairs = before_by_key
                .into_iter()
                .map(|(key, b)| {
                    let a = after_by_key.remove(&key).unwrap_or_else(|| {
                        panic!(
                            "no document {key:?} in the output: lost, or mapped to another \
                             template (the {FILENAME_ANNOTATION} annotation)\n--- output ---\n{after}"
                        )
                    });
                    (b, a)
                })
                .collect();
            assert!(
                after_by_key.is_empty(),
                "documents in the output that the chart does not render: {:?}",
                after_by_key.keys().collect::<Vec<_>>()
            );
            pairs
        }
    }
}

fn compare_streams(
    before: &str,
    after: &str,
    compare: Compare,
    expect: Expect,
    hooks_rendered: bool,
) -> Seen {
    let pairs = paired(before, after, compare);

    let mut seen = Seen::default();
    for (b, a) in &pairs {
        let (bv, av) = (&b.value, &a.value);
        let context = format!(
            "{} {} {}",
            b.source,
            get_str(bv, &["kind"]),
            get_str(bv, &["metadata", "name"])
        );
        if compare == Compare::Bytes {
            assert_eq!(
                leading_comments(&b.text),
                leading_comments(&a.text),
                "{context}: the comments before the document (# Source:) changed"
            );
        }
        if is_list(bv) {
            let b_items = items(bv);
            let a_items = items(av);
            assert_eq!(b_items.len(), a_items.len(), "{context}: List items");
            for (bi, ai) in b_items.iter().zip(a_items) {
                if is_ingress(bi) {
                    check_ingress(&context, bi, ai, expect, &mut seen);
                    seen.in_lists
                        .insert(get_str(bi, &["metadata", "name"]).to_owned());
                } else {
                    assert_eq!(
                        bi, ai,
                        "{context}: a List item that is not an Ingress changed"
                    );
                }
            }
            let mut b_rest = bv.clone();
            let mut a_rest = av.clone();
            b_rest["items"] = Value::Null;
            a_rest["items"] = Value::Null;
            assert_eq!(b_rest, a_rest, "{context}: the List itself changed");
            if compare == Compare::Bytes {
                check_ingress_text(&context, &b.text, &a.text, expect);
            }
        } else if is_ingress(bv) {
            let name = get_str(bv, &["metadata", "name"]).to_owned();
            let hook = get(bv, &["metadata", "annotations", HOOK_ANNOTATION]).is_some();
            if hook && !hooks_rendered {
                assert_eq!(
                    b.text, a.text,
                    "{context}: a hook that Helm 3 does not post-render changed"
                );
                seen.hooks_untouched.insert(name);
                continue;
            }
            check_ingress(&context, bv, av, expect, &mut seen);
            if b.in_list {
                seen.in_lists.insert(name);
            }
            if compare == Compare::Bytes {
                if expect == Expect::Keep {
                    assert_eq!(
                        b.text, a.text,
                        "{context}: R5 must leave the Ingress byte for byte"
                    );
                }
                check_ingress_text(&context, &b.text, &a.text, expect);
            }
        } else {
            match compare {
                Compare::Bytes => assert!(
                    b.text == a.text,
                    "{context}: not an Ingress, but its bytes changed (R7)\n--- before ---\n{}\n--- after ---\n{}",
                    b.text,
                    a.text
                ),
                Compare::Semantic => {
                    assert_eq!(bv, av, "{context}: not an Ingress, but it changed (R7)")
                }
            }
            seen.others += 1;
        }
    }
    seen
}

/// A document of a stream, or (flattened) an item of a List document.
#[derive(Debug)]
struct Entry {
    source: String,
    value: Value,
    /// The document's text ("" for a List item).
    text: String,
    in_list: bool,
}

fn entries(stream: &str, flatten_lists: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    for doc in split_documents(stream) {
        let value = doc.value();
        let source = doc.source().unwrap_or("(no # Source:)").to_owned();
        if flatten_lists && is_list(&value) {
            for item in items(&value) {
                out.push(Entry {
                    source: source.clone(),
                    value: item.clone(),
                    text: String::new(),
                    in_list: true,
                });
            }
        } else {
            out.push(Entry {
                source,
                value,
                text: doc.text,
                in_list: false,
            });
        }
    }
    out
}

/// Entries by (`# Source:`, apiVersion, kind, namespace, name), each key once.
fn keyed(entries: Vec<Entry>, what: &str) -> BTreeMap<[String; 5], Entry> {
    let mut map = BTreeMap::new();
    for entry in entries {
        let v = &entry.value;
        let key = [
            entry.source.clone(),
            get_str(v, &["apiVersion"]).to_owned(),
            get_str(v, &["kind"]).to_owned(),
            get_str(v, &["metadata", "namespace"]).to_owned(),
            get_str(v, &["metadata", "name"]).to_owned(),
        ];
        if let Some(old) = map.insert(key.clone(), entry) {
            panic!("two documents {key:?} in the {what}: {}", old.value);
        }
    }
    map
}

fn is_ingress(v: &Value) -> bool {
    get_str(v, &["kind"]) == "Ingress"
        && INGRESS_API_VERSIONS.contains(&get_str(v, &["apiVersion"]))
}

fn is_list(v: &Value) -> bool {
    matches!(get_str(v, &["kind"]), "List" | "IngressList")
}

fn items(v: &Value) -> &[Value] {
    get(v, &["items"])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// (spec.ingressClassName, annotation), as values: a class that came out as a boolean or a
/// number is not the string class.
fn class_fields(v: &Value) -> (Option<&Value>, Option<&Value>) {
    (
        get(v, &["spec", "ingressClassName"]),
        get(v, &["metadata", "annotations", CLASS_ANNOTATION]),
    )
}

/// The Ingress without its class fields (and without an `annotations` map left empty).
fn without_class(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("ingressClassName");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        let empty = match meta.get_mut("annotations") {
            Some(Value::Object(annotations)) => {
                annotations.remove(CLASS_ANNOTATION);
                annotations.is_empty()
            }
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            meta.remove("annotations");
        }
    }
    v
}

fn check_ingress(context: &str, before: &Value, after: &Value, expect: Expect, seen: &mut Seen) {
    let name = get_str(before, &["metadata", "name"]).to_owned();
    let context = format!("{context} (Ingress {name})");
    let (class, annotation) = class_fields(after);
    let string = |s: &str| Value::String(s.to_owned());
    match expect {
        Expect::Dedicated => {
            assert_eq!(class, None, "{context}: R3 removes spec.ingressClassName");
            assert_eq!(
                annotation,
                Some(&string("traefik")),
                "{context}: R3 sets the annotation to traefik"
            );
        }
        Expect::Class(c) => {
            assert_eq!(
                class,
                Some(&string(c)),
                "{context}: R4 sets spec.ingressClassName"
            );
            assert_eq!(
                annotation,
                Some(&string(c)),
                "{context}: R4 sets the annotation"
            );
        }
        Expect::Keep => {
            assert_eq!(
                class_fields(after),
                class_fields(before),
                "{context}: R5 keeps the class fields"
            );
        }
    }
    assert_eq!(
        without_class(before),
        without_class(after),
        "{context}: something besides the class fields changed (R7)"
    );
    if class_fields(before) == (None, None) {
        seen.classless.insert(name.clone());
    }
    seen.rendered
        .insert(name, get_str(before, &["apiVersion"]).to_owned());
}

/// Byte-level checks of an Ingress (or a List holding Ingresses) in the binary's own output:
/// every line that is not a class field is unchanged and in place (so other annotations
/// keep their quotes, comments stay), and a class field the rules wrote is double-quoted.
fn check_ingress_text(context: &str, before: &str, after: &str, expect: Expect) {
    let is_class_line = |line: &str| {
        let t = line.trim_start().trim_start_matches("- ");
        t.starts_with("ingressClassName:")
            || t.starts_with(&format!("{CLASS_ANNOTATION}:"))
            || t.starts_with(&format!("\"{CLASS_ANNOTATION}\":"))
    };
    let is_annotations_key = |line: &str| matches!(line.trim(), "annotations:" | "annotations: {}");
    let rest = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !is_class_line(l) && !is_annotations_key(l))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        rest(before),
        rest(after),
        "{context}: lines besides the class fields changed\n--- before ---\n{before}\n--- after ---\n{after}"
    );
    if expect == Expect::Keep {
        return;
    }
    let before_lines: BTreeSet<&str> = before.lines().collect();
    for line in after.lines().filter(|l| is_class_line(l)) {
        if before_lines.contains(line) {
            continue;
        }
        let value = line.split_once(": ").map_or("", |(_, v)| v.trim_end());
        assert!(
            value.len() >= 2 && value.starts_with('"') && value.ends_with('"'),
            "{context}: a class field written without double quotes: {line:?}"
        );
    }
}

fn leading_comments(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .filter(|l| l.starts_with('#'))
        .collect()
}

/// Every Ingress of the test chart went through the rules (Helm 3: all but the hook, which
/// Helm 3 does not give to a post-renderer), in all three apiVersions, one a List item.
fn assert_chart_coverage(seen: &Seen, hooks_rendered: bool) {
    let expected: BTreeMap<String, String> = CHART_INGRESSES
        .iter()
        .filter(|(_, _, hook)| hooks_rendered || !hook)
        .map(|(name, api, _)| (name.to_string(), api.to_string()))
        .collect();
    assert_eq!(
        seen.rendered, expected,
        "the Ingresses the rules applied to"
    );
    let hooks: BTreeSet<String> = if hooks_rendered {
        BTreeSet::new()
    } else {
        BTreeSet::from(["web-hook".to_owned()])
    };
    assert_eq!(
        seen.hooks_untouched, hooks,
        "hook Ingresses left as rendered"
    );
    assert_eq!(
        seen.in_lists,
        BTreeSet::from(["web-list-item".to_owned()]),
        "Ingresses found inside a List"
    );
    // ConfigMap, Service, Deployment, IngressClass, HTTPRoute, IngressRoute; and the List's
    // ConfigMap where the List was flattened (Helm 4).
    let others = if hooks_rendered { 7 } else { 6 };
    assert_eq!(seen.others, others, "non-Ingress documents compared");
}

/// The Traefik IngressRoute keeps its own class annotation.
fn assert_ingressroute_untouched(stream: &str) {
    let routes: Vec<Value> = split_documents(stream)
        .iter()
        .map(|doc| doc.value())
        .filter(|v| get_str(v, &["kind"]) == "IngressRoute")
        .collect();
    assert!(!routes.is_empty(), "no IngressRoute in the output");
    for route in routes {
        assert_eq!(
            get_str(&route, &["metadata", "annotations", CLASS_ANNOTATION]),
            "traefik-internal",
            "the IngressRoute's class annotation changed: {route}"
        );
    }
}

fn warning_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.trim_start().to_ascii_lowercase().starts_with("warning"))
        .collect()
}

/// R5: one warning per Ingress left without a class, naming it; none otherwise.
fn assert_warnings(report: &str, seen: &Seen, expect: Expect, context: &str) {
    let warnings = warning_lines(report);
    if expect != Expect::Keep {
        assert!(
            warnings.is_empty(),
            "{context}: warnings although every Ingress gets a class:\n{report}"
        );
        return;
    }
    assert_eq!(
        warnings.len(),
        seen.classless.len(),
        "{context}: one warning per Ingress without a class {:?}:\n{report}",
        seen.classless
    );
    for name in &seen.classless {
        let warning = warnings
            .iter()
            .find(|w| w.contains(name.as_str()))
            .unwrap_or_else(|| panic!("{context}: no warning names {name}:\n{report}"));
        for words in ["default IngressClass", "ingress_class"] {
            assert!(
                warning.contains(words),
                "{context}: the warning for {name} does not mention {words:?}: {warning}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Small helpers

/// `template web <chart> --namespace apps`.
fn template_args() -> Vec<String> {
    vec![
        "template".into(),
        RELEASE.into(),
        data("charts/styrmin-e2e").display().to_string(),
        "--namespace".into(),
        NAMESPACE.into(),
    ]
}

/// `--post-renderer <renderer> --post-renderer-args <arg>...`, each argument one word.
fn post_renderer_args(renderer: impl AsRef<Path>, args: &[String]) -> Vec<String> {
    let mut out = vec![
        "--post-renderer".to_owned(),
        renderer.as_ref().display().to_string(),
    ];
    for arg in args {
        out.push("--post-renderer-args".to_owned());
        out.push(arg.clone());
    }
    out
}

/// `target/release/styrmin-postrender`, checked once.
fn postrender_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| release_binary("styrmin-postrender"))
        .clone()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
