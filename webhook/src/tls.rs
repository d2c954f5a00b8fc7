//! The serving certificate, re-read when its files change (cert-manager, Secret rotation),
//! swapped under a live `ServerConfig`: handshakes after the swap get the new certificate,
//! connections already open keep theirs, no request is dropped.
//!
//! With `--client-ca-file` (mutual TLS), every client must present a certificate that chains
//! to that CA bundle (rustls' `WebPkiClientVerifier`); the bundle is re-read the same way.
//! A client without one never gets past the handshake, so it never reaches HTTP.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

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
    #[error("{path} holds no PEM certificate to verify client certificates against")]
    NoClientCa { path: PathBuf },
    #[error("{path} is not a usable client CA bundle")]
    BadClientCa {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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

    /// A TLS 1.2+ server configuration, HTTP/1.1 only, that serves the watched certificate;
    /// with `client_cas`, client certificates are required and verified against them.
    pub fn server_config(
        &self,
        client_cas: Option<&ClientCaWatcher>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::Config)?;
        let builder = match client_cas {
            Some(watcher) => builder.with_client_cert_verifier(watcher.verifier.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.resolver.clone());
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
    pub async fn run(self, interval: Duration) {
        poll_until_the_end(self, interval, "certificate", Self::poll_once).await;
    }
}

/// Calls `poll` every `interval` on a blocking thread (file reads stay off the request
/// workers) until the process ends; `what` names the watcher in the log if it panics.
async fn poll_until_the_end<W: Send + 'static>(
    mut watcher: W,
    interval: Duration,
    what: &'static str,
    poll: fn(&mut W) -> bool,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        watcher = match tokio::task::spawn_blocking(move || {
            poll(&mut watcher);
            watcher
        })
        .await
        {
            Ok(watcher) => watcher,
            Err(error) => {
                tracing::error!(%error, "{what} watcher stopped");
                return;
            }
        };
    }
}

/// Parses a PEM CA bundle into a verifier that requires a client certificate chaining to it.
pub fn parse_client_cas(path: &Path, pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|source| TlsError::BadClientCa {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        roots.add(cert).map_err(|source| TlsError::BadClientCa {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoClientCa {
            path: path.to_owned(),
        });
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|source| TlsError::BadClientCa {
            path: path.to_owned(),
            source: Box::new(source),
        })
}

/// The current client verifier, swapped when the CA bundle changes.
struct CurrentVerifier(Arc<dyn ClientCertVerifier>);

/// Verifies client certificates against the CA bundle read last.
pub struct ReloadingClientVerifier {
    current: ArcSwap<CurrentVerifier>,
}

impl ReloadingClientVerifier {
    /// The verifier of the CA bundle read last.
    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::clone(&self.current.load().0)
    }
}

impl fmt::Debug for ReloadingClientVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingClientVerifier")
            .finish_non_exhaustive()
    }
}

impl ClientCertVerifier for ReloadingClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// No hints: they would have to outlive a reload. Go's TLS client (the API server's) and
    /// client-go send their one configured certificate either way.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

/// Watches the client CA bundle of `--client-ca-file`.
#[derive(Debug)]
pub struct ClientCaWatcher {
    path: PathBuf,
    verifier: Arc<ReloadingClientVerifier>,
    last_seen: Vec<u8>,
}

impl ClientCaWatcher {
    /// Loads the bundle once; the server does not start without a valid one.
    pub fn open(path: PathBuf) -> Result<Self, TlsError> {
        let pem = read(&path)?;
        let verifier = parse_client_cas(&path, &pem)?;
        Ok(ClientCaWatcher {
            path,
            verifier: Arc::new(ReloadingClientVerifier {
                current: ArcSwap::from_pointee(CurrentVerifier(verifier)),
            }),
            last_seen: pem,
        })
    }

    /// One poll: swaps in the file's bundle when it changed and is valid. Returns whether a
    /// new bundle was loaded.
    pub fn poll_once(&mut self) -> bool {
        let pem = match read(&self.path) {
            Ok(pem) => pem,
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&error), "cannot read the client CA bundle; keeping the current one");
                return false;
            }
        };
        if pem == self.last_seen {
            return false;
        }
        let loaded = parse_client_cas(&self.path, &pem);
        self.last_seen = pem;
        match loaded {
            Ok(verifier) => {
                self.verifier
                    .current
                    .store(Arc::new(CurrentVerifier(verifier)));
                tracing::info!(file = %self.path.display(), "client CA bundle reloaded");
                true
            }
            Err(error) => {
                tracing::error!(error = %ErrorChain(&error), "new client CA bundle is not usable; keeping the current one");
                false
            }
        }
    }

    /// Polls until the process ends.
    pub async fn run(self, interval: Duration) {
        poll_until_the_end(self, interval, "client CA", Self::poll_once).await;
    }
}
