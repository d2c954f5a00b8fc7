//! The command line of `styrmin-certs`.

use std::path::PathBuf;

use crate::{generate, service_dns_names, write_ca_bundle};
use anyhow::Context as _;
use clap::Parser;

/// Makes a CA and a serving certificate for styrmin-webhook, and writes the CA bundle into
/// the MutatingWebhookConfiguration.
#[derive(Debug, Parser)]
#[command(name = "styrmin-certs", version)]
pub struct Args {
    /// The webhook's Service name.
    #[arg(long, env = "STYRMIN_CERTS_SERVICE", default_value = "styrmin-webhook")]
    pub service: String,
    /// The webhook's namespace.
    #[arg(
        long,
        env = "STYRMIN_CERTS_NAMESPACE",
        default_value = "styrmin-system"
    )]
    pub namespace: String,
    /// Where to write ca.crt, ca.key, tls.crt and tls.key. An existing CA there is reused.
    /// The default is where the self-signed overlay's Secret generator reads them.
    #[arg(
        long,
        env = "STYRMIN_CERTS_OUT_DIR",
        default_value = "manifests/overlays/self-signed/certs"
    )]
    pub out_dir: PathBuf,
    /// Days the serving certificate is valid.
    #[arg(long, env = "STYRMIN_CERTS_DAYS", default_value_t = 365)]
    pub days: i64,
    /// Days a new CA is valid.
    #[arg(long, env = "STYRMIN_CERTS_CA_DAYS", default_value_t = 3650)]
    pub ca_days: i64,
    /// Make a new CA even if the output directory has one.
    #[arg(long, env = "STYRMIN_CERTS_NEW_CA")]
    pub new_ca: bool,
    /// The MutatingWebhookConfiguration file whose `caBundle` values are filled in.
    #[arg(
        long,
        env = "STYRMIN_CERTS_WEBHOOK_CONFIG",
        default_value = "manifests/overlays/self-signed/webhook-ca-bundle.yaml"
    )]
    pub webhook_config: PathBuf,
    /// Do not touch the webhook configuration file.
    #[arg(long, env = "STYRMIN_CERTS_NO_WEBHOOK_CONFIG")]
    pub no_webhook_config: bool,
}

impl Args {
    /// Makes the certificates and writes the CA bundle, as the options say.
    pub fn run(self) -> anyhow::Result<()> {
        let Args {
            service,
            namespace,
            out_dir,
            days,
            ca_days,
            new_ca,
            webhook_config,
            no_webhook_config,
        } = self;
        anyhow::ensure!(
            days > 0 && ca_days > 0,
            "--days and --ca-days must be positive"
        );
        let names = service_dns_names(&service, &namespace);
        let generated = generate(&out_dir, &names, ca_days, days, new_ca)
            .with_context(|| format!("making certificates in {}", out_dir.display()))?;
        eprintln!(
            "styrmin-certs: {} CA, serving certificate for {} in {}",
            if generated.new_ca { "new" } else { "reused" },
            names.join(", "),
            out_dir.display()
        );
        if !no_webhook_config {
            write_ca_bundle(&webhook_config, &generated.ca_cert_pem)
                .with_context(|| format!("writing caBundle into {}", webhook_config.display()))?;
            eprintln!(
                "styrmin-certs: caBundle written into {}",
                webhook_config.display()
            );
        }
        Ok(())
    }
}
