//! The sim's TLS material: a fresh self-signed CA per sim, and a serving certificate it signs for
//! `127.0.0.1` and `localhost`. Clients trust the CA through the kubeconfig's
//! `certificate-authority-data`, so TLS verification stays on.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::error::SimError;

/// A CA (PEM, for kubeconfigs) and a TLS acceptor serving the certificate it signed.
#[derive(Clone)]
pub struct TlsMaterial {
    /// The CA certificate in PEM.
    pub ca_pem: String,
    /// Accepts TLS connections with the serving certificate. ALPN: `h2` then `http/1.1`, or only
    /// `http/1.1` when HTTP/2 is off (so clients fall back the way they would behind an
    /// HTTP/1.1-only proxy).
    pub acceptor: TlsAcceptor,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial").finish_non_exhaustive()
    }
}

impl TlsMaterial {
    /// Generates a CA and a serving certificate; `http2` says whether ALPN offers `h2`.
    pub fn generate(http2: bool) -> Result<Self, SimError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "podline-sim-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca_pem = ca_cert.pem();
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "podline-sim");
        let server_cert = params.signed_by(&server_key, &issuer)?;

        let chain: Vec<CertificateDer<'static>> =
            vec![server_cert.der().clone(), ca_cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = if http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(Self {
            ca_pem,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}
