#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! TLS to PostgreSQL, as libpq's `sslmode` and `sslrootcert` say: for
//! dpkit's PostgreSQL tables (`dpkit-databases`) and its ledger in
//! PostgreSQL (`dpkit-ledger`).
//!
//! tokio-postgres reads `sslmode` as `disable`, `prefer` or `require` and
//! knows no root certificate; libpq users write `verify-ca`, `verify-full`
//! and `sslrootcert=…` too. So the connection string is read here first:
//! those two settings are taken out, `verify-*` is passed on as `require`,
//! and the TLS connector (rustls) verifies what libpq would:
//! - `disable`: no TLS;
//! - `prefer` (libpq's default) and `require`: encrypted, the server's
//!   certificate not verified (as libpq, unless a root certificate is
//!   given, when `require` verifies like `verify-ca`); `prefer` falls back
//!   to no TLS when the server offers none;
//! - `verify-ca`: the certificate must chain to `sslrootcert`;
//! - `verify-full`: and name the host connected to.
//!
//! Refusals name the setting, never the string (it may hold a password).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};

pub use tokio_postgres_rustls::MakeRustlsConnect;

/// A connection string, or a certificate it names, that cannot be used.
/// It names the setting, never the string (which may hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the postgres connection string: {0}")]
pub struct Refused(String);

/// `Result` with [`Refused`].
pub type Result<T> = std::result::Result<T, Refused>;

/// How the connection is protected (see the crate's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, its certificate not verified.
    Prefer,
    /// TLS, the certificate not verified.
    Require,
    /// TLS, the certificate chained to `sslrootcert`.
    VerifyCa,
    /// TLS, the certificate chained to `sslrootcert` and naming the host.
    VerifyFull,
}

/// The TLS settings of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    /// How the connection is protected.
    pub mode: Mode,
    /// The root certificate the server's must chain to (`sslrootcert`).
    pub root: Option<PathBuf>,
}

fn refused(reason: &str) -> Refused {
    Refused(reason.to_string())
}

fn mode_of(value: &str) -> Result<Mode> {
    Ok(match value {
        "disable" => Mode::Disable,
        "allow" | "prefer" => Mode::Prefer,
        "require" => Mode::Require,
        "verify-ca" => Mode::VerifyCa,
        "verify-full" => Mode::VerifyFull,
        _ => {
            return Err(refused(
                "sslmode must be disable, prefer, require, verify-ca or verify-full",
            ));
        }
    })
}

/// The TLS settings of `connection` (libpq `key=value` pairs or a
/// `postgresql://` URL), and the string tokio-postgres reads: without
/// `sslrootcert`, with `verify-*` as `require`.
///
/// ```
/// use dpkit_postgres::{Mode, split};
/// let (rest, tls) = split("host=db sslmode=verify-full sslrootcert=/ca.pem").unwrap();
/// assert_eq!((rest.as_str(), tls.mode), ("host='db' sslmode='require'", Mode::VerifyFull));
/// let refused = split("password=secret sslmode=verify-ca").unwrap_err().to_string();
/// assert!(refused.contains("need sslrootcert") && !refused.contains("secret"));
/// ```
pub fn split(connection: &str) -> Result<(String, Tls)> {
    let url = connection.starts_with("postgres://") || connection.starts_with("postgresql://");
    let (pairs, rebuild): (Vec<(String, String)>, _) = if url {
        url_parameters(connection)
    } else {
        (key_values(connection)?, Rebuild::KeyValues)
    };
    let mut tls = Tls {
        mode: Mode::Prefer,
        root: None,
    };
    let mut kept = Vec::new();
    for (key, value) in pairs {
        match key.as_str() {
            "sslmode" => {
                tls.mode = mode_of(&value)?;
                let passed = match tls.mode {
                    Mode::Disable => "disable",
                    Mode::Prefer => "prefer",
                    _ => "require",
                };
                kept.push((key, passed.to_string()));
            }
            "sslrootcert" => tls.root = Some(PathBuf::from(value)),
            _ => kept.push((key, value)),
        }
    }
    if matches!(tls.mode, Mode::VerifyCa | Mode::VerifyFull) && tls.root.is_none() {
        return Err(refused(
            "sslmode verify-ca and verify-full need sslrootcert",
        ));
    }
    // As libpq: `require` with a root certificate verifies the chain.
    if tls.mode == Mode::Require && tls.root.is_some() {
        tls.mode = Mode::VerifyCa;
    }
    Ok((rebuild.join(connection, &kept), tls))
}

/// How to write the string back.
enum Rebuild {
    KeyValues,
    /// A URL: everything before its `?`.
    Url(String),
}

impl Rebuild {
    fn join(&self, _original: &str, pairs: &[(String, String)]) -> String {
        match self {
            Self::KeyValues => pairs
                .iter()
                .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
                .collect::<Vec<_>>()
                .join(" "),
            Self::Url(base) if pairs.is_empty() => base.clone(),
            Self::Url(base) => {
                let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{base}?{}", query.join("&"))
            }
        }
    }
}

/// A URL's query parameters (as written: percent-escapes are left for
/// tokio-postgres, which reads them the same way).
fn url_parameters(connection: &str) -> (Vec<(String, String)>, Rebuild) {
    let (base, query) = connection.split_once('?').unwrap_or((connection, ""));
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    (pairs, Rebuild::Url(base.to_string()))
}

/// libpq's `key=value` pairs: values may be quoted with `'`, in which a
/// backslash escapes the next character.
fn key_values(connection: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = connection.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(refused("expected key=value pairs"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(refused("a quoted value is not closed")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(c);
            }
        }
        pairs.push((key, value));
    }
}

/// The rustls connector for `tls` (unused under `disable`).
///
/// ```
/// let (_, tls) = dpkit_postgres::split("host=db sslmode=require").unwrap();
/// assert!(dpkit_postgres::connector(&tls).is_ok());
/// ```
pub fn connector(tls: &Tls) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (&tls.root, tls.mode) {
        (Some(root), Mode::VerifyCa | Mode::VerifyFull) => {
            let roots = root_store(root)?;
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|_| refused("sslrootcert holds no usable certificate"))?;
            if tls.mode == Mode::VerifyFull {
                webpki
            } else {
                Arc::new(AnyName(webpki))
            }
        }
        _ => Arc::new(Unverified(provider.clone())),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| refused("no TLS version available"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn root_store(path: &std::path::Path) -> Result<Arc<rustls::RootCertStore>> {
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|_| refused("sslrootcert cannot be read as PEM certificates"))?;
    let mut store = rustls::RootCertStore::empty();
    for certificate in certificates {
        let certificate =
            certificate.map_err(|_| refused("sslrootcert cannot be read as PEM certificates"))?;
        store
            .add(certificate)
            .map_err(|_| refused("sslrootcert holds a certificate that is not usable"))?;
    }
    Ok(Arc::new(store))
}

/// `verify-ca`: the chain must verify; the name need not match.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, TlsError> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a root certificate: encrypted, the
/// certificate taken as it comes (libpq's behaviour), its handshake
/// signature still checked.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_settings_are_taken_out_and_verify_modes_passed_on_as_require() {
        let (rest, tls) = split(
            "host=db port=5432 sslmode=verify-full sslrootcert='/a b/ca.pem' password='x\\'y'",
        )
        .unwrap();
        assert_eq!(tls.mode, Mode::VerifyFull);
        assert_eq!(tls.root, Some(PathBuf::from("/a b/ca.pem")));
        assert_eq!(
            rest,
            "host='db' port='5432' sslmode='require' password='x\\'y'"
        );
        let (rest, tls) =
            split("postgresql://u@db/census?sslmode=require&sslrootcert=ca.pem").unwrap();
        assert_eq!(
            tls.mode,
            Mode::VerifyCa,
            "require with a root verifies the chain"
        );
        assert_eq!(rest, "postgresql://u@db/census?sslmode=require");
        assert_eq!(split("host=db").unwrap().1.mode, Mode::Prefer);
        assert!(split("host=db sslmode=verify-full").is_err());
        assert!(split("host=db sslmode=sometimes").is_err());
        let error = split("host=db password='unclosed").unwrap_err().to_string();
        assert!(!error.contains("unclosed"), "{error}");
    }
}
