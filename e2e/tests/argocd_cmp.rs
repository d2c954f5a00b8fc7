//! The Argo CD Config Management Plugin (`manifests/components/argocd-cmp/plugin.yaml`): its
//! `generate` command run the way argocd-cmp-server runs it (the command and args of
//! plugin.yaml, an environment of the sidecar's own variables plus `ARGOCD_APP_*`,
//! `ARGOCD_ENV_*` and `KUBE_VERSION`, the application's folder as working directory), with
//! Helm 3 as `helm` and `styrmin-postrender` on the PATH as in the sidecar image, compared
//! byte for byte with `helm template --post-renderer styrmin-postrender` on the same chart.
//! The example Application is valid for Argo CD's Application CRD
//! (`e2e/tests/data/crds/argoproj.io_applications.yaml`) and names the plugin and its
//! variables as plugin.yaml does. The component builds with kustomize.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use styrmin_e2e::crd_schema::{self, crd_version_schema};
use styrmin_e2e::{
    Scratch, copy_dir, data, describe, parse_yaml, release_binary, run, run_ok, tool, utf8,
    workspace_root,
};

fn component_file(name: &str) -> String {
    let path = workspace_root()
        .join("manifests/components/argocd-cmp")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn plugin() -> Value {
    parse_yaml(&component_file("plugin.yaml"))
}

fn application() -> Value {
    let path = workspace_root().join("manifests/examples/argocd/application.yaml");
    parse_yaml(&std::fs::read_to_string(&path).expect("application.yaml"))
}

/// A sidecar's bin folder: `helm` is Helm 3, `styrmin-postrender` the release build.
fn sidecar_bin(scratch: &Scratch) -> std::path::PathBuf {
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::os::unix::fs::symlink(tool("helm3"), bin.join("helm")).expect("helm");
    std::os::unix::fs::symlink(
        release_binary("styrmin-postrender"),
        bin.join("styrmin-postrender"),
    )
    .expect("styrmin-postrender");
    bin
}

/// The application's folder: the e2e chart, a values file and a styrmin config.
fn app_folder(scratch: &Scratch) -> std::path::PathBuf {
    let app = scratch.join("app");
    copy_dir(&data("charts/styrmin-e2e"), &app);
    std::fs::write(app.join("values-prod.yaml"), "host: prod.example.com\n").expect("values");
    std::fs::write(
        app.join("styrmin.yaml"),
        "cluster: {ingress_class: nginx}\nenvironment: {ingress_class: haproxy}\n",
    )
    .expect("config");
    app
}

/// Helm's homes under the scratch folder (the sidecar's are under /tmp).
fn helm_env(cmd: &mut Command, scratch: &Scratch) {
    cmd.env("HOME", scratch.path())
        .env("HELM_CONFIG_HOME", scratch.join("config"))
        .env("HELM_CACHE_HOME", scratch.join("cache"))
        .env("HELM_DATA_HOME", scratch.join("data"))
        .env("KUBECONFIG", scratch.join("no-such-kubeconfig"));
}

/// plugin.yaml's `generate`, as argocd-cmp-server runs it.
fn generate(scratch: &Scratch, app: &Path, bin: &Path, env: &[(&str, &str)]) -> Output {
    let generate = &plugin()["spec"]["generate"];
    let command: Vec<String> = generate["command"]
        .as_array()
        .expect("generate.command")
        .iter()
        .chain(generate["args"].as_array().into_iter().flatten())
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect();
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .current_dir(app);
    helm_env(&mut cmd, scratch);
    for (key, value) in env {
        cmd.env(key, value);
    }
    run(&mut cmd, None)
}

fn helm_template_with_post_renderer(scratch: &Scratch, app: &Path, extra: &[&str]) -> String {
    let mut cmd = Command::new(tool("helm3"));
    cmd.args(["template", "web"])
        .arg(app)
        .args(["--namespace", "apps"])
        .args(extra)
        .arg("--post-renderer")
        .arg(release_binary("styrmin-postrender"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STYRMIN_") {
            cmd.env_remove(&key);
        }
    }
    helm_env(&mut cmd, scratch);
    cmd.current_dir(app);
    utf8(run_ok(&mut cmd, None).stdout, "helm template")
}

const APP_ENV: [(&str, &str); 4] = [
    ("ARGOCD_APP_NAME", "web"),
    ("ARGOCD_APP_NAMESPACE", "apps"),
    ("ARGOCD_APP_SOURCE_PATH", "charts/web"),
    ("KUBE_VERSION", "1.30"),
];

#[test]
fn generate_equals_helm_template_with_the_post_renderer() {
    let scratch = Scratch::new("argocd-cmp");
    let bin = sidecar_bin(&scratch);
    let app = app_folder(&scratch);
    let mut env = APP_ENV.to_vec();
    env.push(("ARGOCD_ENV_HELM_VALUES", "values-prod.yaml"));
    env.push(("ARGOCD_ENV_STYRMIN_CONFIG", "styrmin.yaml"));
    let output = generate(&scratch, &app, &bin, &env);
    assert!(
        output.status.success(),
        "generate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let generated = utf8(output.stdout, "generate");
    let config = format!("--config={}", app.join("styrmin.yaml").display());
    let want = helm_template_with_post_renderer(
        &scratch,
        &app,
        &[
            "--values",
            "values-prod.yaml",
            "--kube-version",
            "1.30",
            "--post-renderer-args",
            &config,
            "--post-renderer-args",
            "--kube-version=1.30",
        ],
    );
    assert_eq!(generated, want);
    // The values file and the config both took effect.
    assert!(generated.contains("prod.example.com"), "{generated}");
    assert!(
        generated.contains("ingressClassName: \"haproxy\""),
        "{generated}"
    );

    // The last-deployed record decides alone (W5), and no ARGOCD_ENV_STYRMIN_CONFIG means
    // styrmin.yaml of the app.
    let mut env = APP_ENV.to_vec();
    env.push(("ARGOCD_ENV_STYRMIN_LAST_DEPLOYED", "class:nginx"));
    let output = generate(&scratch, &app, &bin, &env);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let want = helm_template_with_post_renderer(
        &scratch,
        &app,
        &[
            "--kube-version",
            "1.30",
            "--post-renderer-args",
            &config,
            "--post-renderer-args",
            "--kube-version=1.30",
            "--post-renderer-args",
            "--last-deployed=class:nginx",
        ],
    );
    let generated = utf8(output.stdout, "generate");
    assert_eq!(generated, want);
    assert!(
        generated.contains("ingressClassName: \"nginx\""),
        "{generated}"
    );
}

#[test]
fn generate_fails_with_nothing_on_stdout_when_the_post_renderer_refuses() {
    let scratch = Scratch::new("argocd-cmp-refuses");
    let bin = sidecar_bin(&scratch);
    let app = app_folder(&scratch);
    std::fs::write(
        app.join("styrmin.yaml"),
        "deployment: {dedicated_ingress: true}\n",
    )
    .expect("config");
    let output = generate(&scratch, &app, &bin, &APP_ENV);
    assert!(!output.status.success(), "generate succeeded");
    assert!(output.stdout.is_empty(), "something was written");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("deployment.dedicated_ingress"), "{stderr}");
}

/// The `v1alpha1` schema of the Application CRD.
fn schema_errors(object: &Value) -> Vec<String> {
    let schema = crd_version_schema(&data("crds/argoproj.io_applications.yaml"), "v1alpha1");
    crd_schema::schema_errors(&schema, object)
}

#[test]
fn example_application_is_valid_for_the_crd_and_names_the_plugin() {
    let app = application();
    let errors = schema_errors(&app);
    assert!(errors.is_empty(), "{errors:#?}");
    let plugin = plugin();
    assert_eq!(plugin["kind"], "ConfigManagementPlugin");
    let name = format!(
        "{}-{}",
        plugin["metadata"]["name"].as_str().expect("name"),
        plugin["spec"]["version"].as_str().expect("version")
    );
    assert_eq!(app["spec"]["source"]["plugin"]["name"], json!(name));
    // Every variable the Application sets is one the generate command reads.
    let script = plugin["spec"]["generate"]["args"][0]
        .as_str()
        .expect("script");
    for env in app["spec"]["source"]["plugin"]["env"]
        .as_array()
        .expect("env")
    {
        let variable = format!("ARGOCD_ENV_{}", env["name"].as_str().expect("env name"));
        assert!(script.contains(&variable), "{variable} is not read");
    }
}

#[test]
fn the_validator_rejects_a_broken_application() {
    let base = application();
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut object = base.clone();
        f(&mut object);
        schema_errors(&object)
    };
    let errors = broken(&|o| o["spec"]["source"]["plugin"]["env"] = json!({"HELM_VALUES": "x"}));
    assert!(
        errors.iter().any(|e| e.contains("expected array")),
        "{errors:?}"
    );
    let errors = broken(&|o| o["spec"]["source"]["plugin"]["envs"] = json!([]));
    assert!(
        errors.iter().any(|e| e.contains("unknown field")),
        "{errors:?}"
    );
    let errors = broken(&|o| {
        o["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("destination");
    });
    assert!(
        errors.iter().any(|e| e.contains("destination")),
        "{errors:?}"
    );
}

/// The component adds the sidecar and the plugin's ConfigMap to Argo CD's repo-server.
#[test]
fn component_adds_the_sidecar_to_the_repo_server() {
    let scratch = Scratch::new("argocd-component");
    let overlay = scratch.join("overlay");
    std::fs::create_dir_all(&overlay).expect("overlay");
    let repo_server = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: argocd-repo-server\n  namespace: argocd\nspec:\n  selector:\n    matchLabels: {app: repo}\n  template:\n    metadata:\n      labels: {app: repo}\n    spec:\n      containers:\n        - name: argocd-repo-server\n          image: quay.io/argoproj/argocd:v3.1.0\n      volumes:\n        - name: var-files\n          emptyDir: {}\n        - name: plugins\n          emptyDir: {}\n";
    std::fs::write(overlay.join("repo-server.yaml"), repo_server).expect("repo server");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "resources: [repo-server.yaml]\ncomponents: [{}{}]\n",
            // kustomize takes a component by a relative path only.
            "../".repeat(overlay.components().count() - 1),
            workspace_root()
                .join("manifests/components/argocd-cmp")
                .display()
                .to_string()
                .trim_start_matches('/')
        ),
    )
    .expect("kustomization");
    let mut cmd = Command::new(tool("kubectl"));
    cmd.arg("kustomize").arg(&overlay);
    let output = run(&mut cmd, None);
    assert!(
        output.status.success(),
        "{}: {}",
        describe(&cmd),
        String::from_utf8_lossy(&output.stderr)
    );
    let out = utf8(output.stdout, "kustomize");
    let objects: Vec<Value> = styrmin_e2e::split_documents(&out)
        .iter()
        .map(styrmin_e2e::Doc::value)
        .collect();
    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the plugin's ConfigMap");
    assert_eq!(config_map["metadata"]["name"], "styrmin-cmp-plugin");
    assert_eq!(
        config_map["data"]["plugin.yaml"].as_str(),
        Some(component_file("plugin.yaml").as_str())
    );
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the repo server");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    let sidecar = containers
        .iter()
        .find(|c| c["name"] == "styrmin-helm")
        .expect("the sidecar");
    assert_eq!(sidecar["command"][0], "/var/run/argocd/argocd-cmp-server");
    assert_eq!(sidecar["securityContext"]["runAsUser"], 999);
    assert!(
        containers.iter().any(|c| c["name"] == "argocd-repo-server"),
        "the repo server's own container is kept"
    );
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes");
    for name in [
        "var-files",
        "plugins",
        "styrmin-cmp-plugin",
        "styrmin-cmp-tmp",
    ] {
        assert!(volumes.iter().any(|v| v["name"] == name), "volume {name}");
    }
}
