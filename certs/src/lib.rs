//! Makes the webhook's certificates: a CA and a serving certificate for
//! `<service>.<namespace>.svc` (and `.svc.cluster.local`), and writes the CA bundle into the
//! `caBundle` fields of a MutatingWebhookConfiguration file without re-serialising it.

pub mod cli;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("cannot generate the {what}")]
    Generate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("cannot load the existing CA from {path}")]
    LoadCa {
        path: PathBuf,
        #[source]
        source: rcgen::Error,
    },
    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} has no `caBundle:` key to fill in (add `caBundle: \"\"` under each webhook's clientConfig)"
    )]
    NoCaBundle { path: PathBuf },
}

/// PEM texts of a CA and of a serving certificate it signed.
#[derive(Debug, Clone)]
pub struct Generated {
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// Whether the CA was made now (false: an existing one was reused).
    pub new_ca: bool,
}

/// The DNS names the API server uses for a webhook Service.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

fn generate_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> CertsError {
    move |source| CertsError::Generate { what, source }
}

/// A new CA valid for `days`.
pub fn new_ca(days: i64) -> Result<(String, String), CertsError> {
    let key = KeyPair::generate().map_err(generate_error("CA key"))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generate_error("CA"))?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "styrmin-webhook CA");
    name.push(DnType::OrganizationName, "Styrmin");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(days);
    let cert = params.self_signed(&key).map_err(generate_error("CA"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `dns_names`, signed by the CA, valid for `days`.
pub fn new_serving_cert(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    dns_names: &[String],
    days: i64,
) -> Result<(String, String), CertsError> {
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(|source| CertsError::LoadCa {
        path: "CA key".into(),
        source,
    })?;
    let issuer =
        Issuer::from_ca_cert_pem(ca_cert_pem, ca_key).map_err(|source| CertsError::LoadCa {
            path: "CA certificate".into(),
            source,
        })?;
    let key = KeyPair::generate().map_err(generate_error("serving key"))?;
    let mut params = CertificateParams::new(dns_names.to_vec())
        .map_err(generate_error("serving certificate"))?;
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        dns_names.first().cloned().unwrap_or_default(),
    );
    params.distinguished_name = name;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + Duration::days(days);
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(generate_error("serving certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The base64 text that goes into `caBundle`: the CA's PEM, base64-encoded.
pub fn ca_bundle(ca_cert_pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(ca_cert_pem.as_bytes())
}

/// Replaces the value of every `caBundle:` key in a YAML text, keeping every other byte
/// (comments, order, quoting of other values). Returns `None` when there is no such key.
pub fn splice_ca_bundle(yaml: &str, bundle: &str) -> Option<String> {
    let mut out = String::with_capacity(yaml.len() + bundle.len());
    let mut found = false;
    for line in yaml.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        // `caBundle:` as a key, possibly as the first key of a sequence item (`- caBundle:`).
        let (prefix, rest) = match trimmed.strip_prefix("- ") {
            Some(after_dash) if after_dash.trim_start().starts_with("caBundle:") => {
                let spaces = after_dash.len() - after_dash.trim_start().len();
                (
                    format!("{indent}- {}", " ".repeat(spaces)),
                    after_dash.trim_start(),
                )
            }
            _ => (indent.to_owned(), trimmed),
        };
        let Some(value_and_rest) = rest.strip_prefix("caBundle:") else {
            out.push_str(line);
            continue;
        };
        found = true;
        let newline = if value_and_rest.ends_with("\r\n") {
            "\r\n"
        } else if value_and_rest.ends_with('\n') {
            "\n"
        } else {
            ""
        };
        let value_part = &value_and_rest[..value_and_rest.len() - newline.len()];
        // Keep a trailing comment: ` # ...` after the value (base64 and quotes hold no ` #`).
        let comment = value_part.find(" #").map_or("", |at| &value_part[at..]);
        out.push_str(&prefix);
        out.push_str("caBundle: \"");
        out.push_str(bundle);
        out.push('"');
        out.push_str(comment);
        out.push_str(newline);
    }
    found.then_some(out)
}

fn write_file(path: &Path, contents: &str, private: bool) -> Result<(), CertsError> {
    let io = |action| {
        move |source| CertsError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).map_err(io("write"))?;
    if private {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .map_err(io("set permissions of"))?;
    }
    // A rename, so that a watching server never reads half a file.
    std::fs::rename(&tmp, path).map_err(io("replace"))
}

/// Writes `caBundle` into a webhook configuration file in place.
pub fn write_ca_bundle(config: &Path, ca_cert_pem: &str) -> Result<(), CertsError> {
    let text = std::fs::read_to_string(config).map_err(|source| CertsError::Io {
        action: "read",
        path: config.to_owned(),
        source,
    })?;
    let spliced =
        splice_ca_bundle(&text, &ca_bundle(ca_cert_pem)).ok_or_else(|| CertsError::NoCaBundle {
            path: config.to_owned(),
        })?;
    write_file(config, &spliced, false)
}

/// Makes (or reuses) the CA in `out_dir` and a new serving certificate, and writes
/// `ca.crt`, `ca.key`, `tls.crt`, `tls.key` there. An existing `ca.crt` + `ca.key` pair is
/// reused unless `new_ca` is set, so that a rotated serving certificate keeps the bundle.
pub fn generate(
    out_dir: &Path,
    dns_names: &[String],
    ca_days: i64,
    days: i64,
    new_ca_wanted: bool,
) -> Result<Generated, CertsError> {
    std::fs::create_dir_all(out_dir).map_err(|source| CertsError::Io {
        action: "create",
        path: out_dir.to_owned(),
        source,
    })?;
    let (ca_cert_path, ca_key_path) = (out_dir.join("ca.crt"), out_dir.join("ca.key"));
    let existing = if new_ca_wanted {
        None
    } else {
        match (
            std::fs::read_to_string(&ca_cert_path),
            std::fs::read_to_string(&ca_key_path),
        ) {
            (Ok(cert), Ok(key)) => Some((cert, key)),
            _ => None,
        }
    };
    let new_ca_made = existing.is_none();
    let (ca_cert_pem, ca_key_pem) = match existing {
        Some(pair) => pair,
        None => new_ca(ca_days)?,
    };
    let (cert_pem, key_pem) = new_serving_cert(&ca_cert_pem, &ca_key_pem, dns_names, days)?;
    if new_ca_made {
        write_file(&ca_key_path, &ca_key_pem, true)?;
        write_file(&ca_cert_path, &ca_cert_pem, false)?;
    }
    // The key first, then the certificate: a watcher sees a mismatched pair at most briefly.
    write_file(&out_dir.join("tls.key"), &key_pem, true)?;
    write_file(&out_dir.join("tls.crt"), &cert_pem, false)?;
    Ok(Generated {
        ca_cert_pem,
        ca_key_pem,
        cert_pem,
        key_pem,
        new_ca: new_ca_made,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_cert_has_the_service_names_and_is_signed_by_the_ca() {
        let names = service_dns_names("styrmin-webhook", "styrmin-system");
        let (ca_pem, ca_key) = new_ca(10).unwrap();
        let (cert_pem, _) = new_serving_cert(&ca_pem, &ca_key, &names, 5).unwrap();
        let (_, ca_der) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
        let ca = ca_der.parse_x509().unwrap();
        let (_, der) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).unwrap();
        let cert = der.parse_x509().unwrap();
        assert!(ca.is_ca());
        assert!(!cert.is_ca());
        assert_eq!(cert.issuer(), ca.subject());
        cert.verify_signature(Some(ca.public_key())).unwrap();
        let san = cert.subject_alternative_name().unwrap().unwrap();
        let dns: Vec<String> = san
            .value
            .general_names
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(
            dns,
            vec![
                "DNSName(styrmin-webhook.styrmin-system.svc)",
                "DNSName(styrmin-webhook.styrmin-system.svc.cluster.local)"
            ]
        );
        let days = (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp())
            / 86_400;
        assert_eq!(days, 5);
    }

    #[test]
    fn splice_replaces_every_ca_bundle_and_keeps_the_rest() {
        let yaml = "# header comment\nwebhooks:\n  - name: a # first\n    clientConfig:\n      caBundle: \"\" # filled by styrmin-certs\n      service: {name: s}\n  - caBundle: old\n\r\nother: caBundle: no\n";
        let out = splice_ca_bundle(yaml, "QUJD").unwrap();
        assert_eq!(
            out,
            "# header comment\nwebhooks:\n  - name: a # first\n    clientConfig:\n      caBundle: \"QUJD\" # filled by styrmin-certs\n      service: {name: s}\n  - caBundle: \"QUJD\"\n\r\nother: caBundle: no\n"
        );
        assert!(splice_ca_bundle("a: b\n", "x").is_none());
        // Idempotent with the same bundle.
        assert_eq!(splice_ca_bundle(&out, "QUJD").unwrap(), out);
    }

    #[test]
    fn generate_reuses_the_ca_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let names = service_dns_names("s", "n");
        let first = generate(dir.path(), &names, 10, 1, false).unwrap();
        let second = generate(dir.path(), &names, 10, 1, false).unwrap();
        assert!(first.new_ca && !second.new_ca);
        assert_eq!(first.ca_cert_pem, second.ca_cert_pem);
        assert_ne!(first.cert_pem, second.cert_pem);
        let third = generate(dir.path(), &names, 10, 1, true).unwrap();
        assert_ne!(third.ca_cert_pem, first.ca_cert_pem);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0);
    }
}
