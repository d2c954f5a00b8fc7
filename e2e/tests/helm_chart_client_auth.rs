//! The chart's mutual-TLS values (`certificate.clientAuth`): each CA source renders the
//! webhook's `--client-ca-file` and the volume it reads, wired to the certificate modes; the
//! schema and the templates refuse what cannot work, naming the key. Real Helm 3 and 4.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use serde_json::Value;
use styrmin_e2e::{HelmHome, run_fails, run_ok, split_documents, utf8, workspace_root};

const HELMS: [&str; 2] = ["helm3", "helm4"];
const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

fn helm(home: &HelmHome, helm: &str, values: &[&str]) -> std::process::Command {
    let mut cmd = home.helm(helm);
    cmd.args(["template", "styrmin-webhook"])
        .arg(workspace_root().join("charts/styrmin-webhook"))
        .args(["--namespace", "styrmin-system"])
        .args(values);
    cmd
}

/// The webhook container's args and the pod's volumes, as rendered with `values`.
fn rendered(helm_name: &str, values: &[&str]) -> (Vec<Value>, Value, Value) {
    let home = HelmHome::new("chart-client-auth");
    let text = utf8(
        run_ok(&mut helm(&home, helm_name, values), None).stdout,
        "helm template output",
    );
    let objects: Vec<Value> = split_documents(&text)
        .iter()
        .map(|d| d.value())
        .filter(|v| !v.is_null())
        .collect();
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "styrmin-webhook")
        .unwrap()
        .clone();
    let pod = &deployment["spec"]["template"]["spec"];
    (
        objects.clone(),
        pod["containers"][0]["args"].clone(),
        pod["volumes"].clone(),
    )
}

fn has_arg(args: &Value, arg: &str) -> bool {
    args.as_array().unwrap().iter().any(|a| a == arg)
}

#[test]
fn each_client_ca_source_renders_the_flag_and_its_volume() {
    let bundle = base64_of(CA_PEM);
    for helm_name in HELMS {
        // Off by default: no flag, no ConfigMap.
        let (objects, args, _) = rendered(helm_name, &[]);
        assert!(
            !args
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a.as_str().unwrap().starts_with("--client-ca-file")),
            "{args}"
        );
        assert!(!objects.iter().any(|o| {
            o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-client-ca"))
        }));

        // caBundle: the chart's ConfigMap holds the PEM, mounted where the flag points.
        let (objects, args, volumes) = rendered(
            helm_name,
            &[
                "--set=certificate.clientAuth.enabled=true",
                &format!("--set=certificate.clientAuth.caBundle={bundle}"),
            ],
        );
        assert!(
            has_arg(
                &args,
                "--client-ca-file=/etc/styrmin-webhook/client-ca/ca.crt"
            ),
            "{args}"
        );
        let config_map = objects
            .iter()
            .find(|o| {
                o["kind"] == "ConfigMap" && o["metadata"]["name"] == "styrmin-webhook-client-ca"
            })
            .unwrap();
        assert_eq!(config_map["data"]["ca.crt"], CA_PEM);
        assert!(
            volumes
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["configMap"]["name"] == "styrmin-webhook-client-ca"),
            "{volumes}"
        );

        // existingConfigMap: that ConfigMap, none of the chart's.
        let (objects, args, volumes) = rendered(
            helm_name,
            &[
                "--set=certificate.clientAuth.enabled=true",
                "--set=certificate.clientAuth.existingConfigMap=api-server-client-ca",
            ],
        );
        assert!(has_arg(
            &args,
            "--client-ca-file=/etc/styrmin-webhook/client-ca/ca.crt"
        ));
        assert!(
            volumes
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["configMap"]["name"] == "api-server-client-ca"),
            "{volumes}"
        );
        assert!(
            !objects
                .iter()
                .any(|o| o["metadata"]["name"] == "styrmin-webhook-client-ca")
        );

        // fromServingSecret with cert-manager: the serving Secret's ca.crt, already mounted.
        let (_, args, _) = rendered(
            helm_name,
            &[
                "--set=certificate.mode=certManager",
                "--set=certificate.clientAuth.enabled=true",
                "--set=certificate.clientAuth.fromServingSecret=true",
            ],
        );
        assert!(
            has_arg(&args, "--client-ca-file=/etc/styrmin-webhook/tls/ca.crt"),
            "{args}"
        );
    }
}

#[test]
fn client_auth_values_that_cannot_work_are_refused_naming_the_key() {
    for helm_name in HELMS {
        for (values, names) in [
            (
                vec!["--set=certificate.clientAuth.enabled=yes"],
                vec!["clientAuth", "enabled"],
            ),
            (
                vec!["--set=certificate.clientAuth.caBundle=not base64!"],
                vec!["clientAuth", "caBundle"],
            ),
            (
                vec!["--set=certificate.clientAuth.caFile=x"],
                vec!["caFile"],
            ),
            // Enabled with no CA source, or two.
            (
                vec!["--set=certificate.clientAuth.enabled=true"],
                vec!["certificate.clientAuth.caBundle"],
            ),
            (
                vec![
                    "--set=certificate.clientAuth.enabled=true",
                    "--set=certificate.clientAuth.existingConfigMap=a",
                    "--set=certificate.clientAuth.fromServingSecret=true",
                    "--set=certificate.mode=certManager",
                ],
                vec!["exactly one"],
            ),
            // The generated CA's key is not kept: nothing could sign a client certificate.
            (
                vec![
                    "--set=certificate.clientAuth.enabled=true",
                    "--set=certificate.clientAuth.fromServingSecret=true",
                ],
                vec!["fromServingSecret", "generated"],
            ),
        ] {
            let home = HelmHome::new("chart-client-auth-bad");
            run_fails(
                &mut helm(&home, helm_name, &values),
                &values.join(" "),
                &names,
            );
        }
    }
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
