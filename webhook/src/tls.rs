//! The serving certificate, re-read when its files change (cert-manager, Secret rotation),
//! swapped under a live `ServerConfig`: handshakes after the swap get the new certificate,
//! connections already open keep theirs, no request is dropped.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::metrics::Metrics;
use crate::telemetry::ErrorChain;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} is not a PEM certificate chain")]
    BadCertificate {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("{path} is not a PEM private key")]
    BadKey {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("the key in {key} does not match the certificate in {cert}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("TLS configuration")]
    Config(#[source] rustls::Error),
}

/// A certificate and key as loaded, with the certificate's expiry.
#[derive(Debug)]
pub struct LoadedCert {
    pub key: Arc<CertifiedKey>,
    /// Unix seconds of the leaf's notAfter, when it can be read.
    pub not_after: Option<i64>,
}

/// The crypto provider the webhook uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM chain and key and checks that they belong together.
pub fn parse_cert(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
) -> Result<LoadedCert, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::BadCertificate {
            path: cert_path.to_owned(),
            source,
        })?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_owned(),
        });
    };
    let not_after = x509_parser::parse_x509_certificate(leaf)
        .ok()
        .map(|(_, cert)| cert.validity().not_after.timestamp());
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::BadKey {
        path: key_path.to_owned(),
        source,
    })?;
    let certified =
        CertifiedKey::from_der(chain, key, &provider()).map_err(|source| TlsError::Mismatch {
            cert: cert_path.to_owned(),
            key: key_path.to_owned(),
            source,
        })?;
    Ok(LoadedCert {
        key: Arc::new(certified),
        not_after,
    })
}

/// Resolves every handshake to the current certificate.
pub struct ReloadingCert {
    current: ArcSwap<CertifiedKey>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Watches a certificate and key file pair.
#[derive(Debug)]
pub struct CertWatcher {
    cert_path: PathBuf,
    key_path: PathBuf,
    resolver: Arc<ReloadingCert>,
    last_seen: (Vec<u8>, Vec<u8>),
    metrics: Arc<Metrics>,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

impl CertWatcher {
    /// Loads the files once; the server does not start without a valid certificate.
    pub fn open(
        cert_path: PathBuf,
        key_path: PathBuf,
        metrics: Arc<Metrics>,
    ) -> Result<Self, TlsError> {
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let loaded = parse_cert(&cert_path, &cert_pem, &key_path, &key_pem)?;
        if let Some(not_after) = loaded.not_after {
            metrics
                .certificate_expiry_timestamp_seconds
                .set(not_after as f64);
        }
        Ok(CertWatcher {
            cert_path,
            key_path,
            resolver: Arc::new(ReloadingCert {
                current: ArcSwap::new(loaded.key),
            }),
            last_seen: (cert_pem, key_pem),
            metrics,
        })
    }

    /// A TLS 1.2+ server configuration, HTTP/1.1 only, that serves the watched certificate.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// One poll: swaps in the files' certificate when they changed and are valid together.
    /// Returns whether a new certificate was loaded.
    pub fn poll_once(&mut self) -> bool {
        let (cert_pem, key_pem) = match (read(&self.cert_path), read(&self.key_path)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(error), _) | (_, Err(error)) => {
                // A rotation may replace the files one at a time; try again next poll.
                tracing::warn!(error = %ErrorChain(&error), "cannot read the serving certificate; keeping the current one");
                return false;
            }
        };
        if (cert_pem.as_slice(), key_pem.as_slice())
            == (self.last_seen.0.as_slice(), self.last_seen.1.as_slice())
        {
            return false;
        }
        match parse_cert(&self.cert_path, &cert_pem, &self.key_path, &key_pem) {
            Ok(loaded) => {
                self.resolver.current.store(loaded.key);
                if let Some(not_after) = loaded.not_after {
                    self.metrics
                        .certificate_expiry_timestamp_seconds
                        .set(not_after as f64);
                }
                self.metrics.certificate_reloads.inc();
                self.last_seen = (cert_pem, key_pem);
                tracing::info!(cert = %self.cert_path.display(), not_after = loaded.not_after, "serving certificate reloaded");
                true
            }
            Err(error) => {
                // Remember it so that the same broken pair is reported once; a change of
                // either file is tried again.
                self.last_seen = (cert_pem, key_pem);
                self.metrics.certificate_reload_failures.inc();
                tracing::error!(error = %ErrorChain(&error), "new serving certificate is not usable; keeping the current one");
                false
            }
        }
    }

    /// Polls until the process ends.
    pub async fn run(mut self, interval: Duration) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self = match tokio::task::spawn_blocking(move || {
                self.poll_once();
                self
            })
            .await
            {
                Ok(this) => this,
                Err(error) => {
                    tracing::error!(%error, "certificate watcher stopped");
                    return;
                }
            };
        }
    }
}
