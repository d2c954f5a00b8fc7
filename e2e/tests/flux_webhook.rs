//! One post-renderer, two writers: for every configuration of the resolution table, the
//! post-renderer the webhook (`--flux-post-renderer`) puts into a HelmRelease equals the
//! `postRenderers` that `styrmin-postrender flux` prints, and where the CLI prints none (R5,
//! exit 3) the webhook adds none.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use styrmin_e2e::{Scratch, release_binary, run, utf8};
use styrmin_webhook::decide::{Admission, DecideOptions, DecidedAt, RequestOutcome, decide};
use styrmin_webhook::policy_file::parse_policy;
use support::RESOLUTION_TABLE;

mod support;

fn helm_release() -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "styrmin-app"},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "podinfo",
            "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}}},
    })
}

fn helm_release_create() -> Admission {
    Admission::new(
        serde_json::from_value(json!({
            "uid": "u-1",
            "kind": {"group": "helm.toolkit.fluxcd.io", "version": "v2", "kind": "HelmRelease"},
            "namespace": "styrmin-app",
            "operation": "CREATE",
            "object": helm_release(),
        }))
        .expect("review"),
    )
}

#[test]
fn the_webhook_injects_exactly_what_the_cli_prints() {
    let scratch = Scratch::new("flux-webhook");
    let on = DecideOptions {
        flux_post_renderer: true,
        ..DecideOptions::default()
    };
    let (mut patched, mut none) = (0, 0);
    for (i, config) in RESOLUTION_TABLE.iter().enumerate() {
        let config_path = scratch.write(&format!("config-{i}.yaml"), &config.config_yaml());
        let output = run(
            Command::new(release_binary("styrmin-postrender"))
                .arg("flux")
                .arg("--config")
                .arg(&config_path),
            None,
        );
        let view = parse_policy(Path::new("policy.json"), &config.policy_yaml()).expect("policy");
        let request = helm_release_create();
        let decision = decide(&view, &request, &on, DecidedAt::now());
        let object = helm_release();
        let mut after = object.clone();
        json_patch::patch(&mut after, &decision.patch).expect("apply");

        match output.status.code() {
            Some(0) => {
                let printed: Value =
                    serde_saphyr::from_str(&utf8(output.stdout, "flux output")).expect("yaml");
                assert_eq!(decision.outcome, RequestOutcome::Patched, "{config:?}");
                assert_eq!(
                    after["spec"]["postRenderers"], printed["postRenderers"],
                    "{config:?}"
                );
                patched += 1;
            }
            Some(3) => {
                assert!(
                    decision.patch.is_empty(),
                    "{config:?}: {:?}",
                    decision.patch
                );
                assert_eq!(after, object);
                none += 1;
            }
            other => panic!(
                "{config:?}: flux exited {other:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            ),
        }
    }
    assert!(patched >= 8 && none >= 3, "{patched} patched, {none} R5");
}
