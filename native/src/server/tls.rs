//! TLS with rustls (ring as the crypto provider): the server configuration
//! built from the worker's settings, and the handshake of each connection.
//!
//! Loading happens once, in the worker before it is ready, so that a bad
//! certificate or key is one error line and a boot error, never a worker
//! that dies on its first connection. Every message names the file at fault.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::config::HttpMode;

/// `cert_reqs`: whether clients must present a certificate (the values of
/// Python's `ssl.CERT_NONE`, `CERT_OPTIONAL`, `CERT_REQUIRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Optional,
    Required,
}

/// The TLS settings, as paths and values.
pub struct TlsFiles<'a> {
    pub certfile: &'a Path,
    /// `None`: the key is in `certfile`, after the certificates.
    pub keyfile: Option<&'a Path>,
    pub password: Option<&'a str>,
    pub ca_certs: Option<&'a Path>,
    pub client_auth: ClientAuth,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn shown(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", shown(path)))
}

fn certificates(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot load {what} {}: {e}", shown(path)))?;
    if certs.is_empty() {
        return Err(format!(
            "cannot load {what} {}: no PEM certificate in it",
            shown(path)
        ));
    }
    Ok(certs)
}

/// The text between the BEGIN and END lines of `label`, both included.
fn pem_block<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(&text[start..stop])
}

fn private_key(path: &Path, password: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read("keyfile", path)?;
    let fail = |why: String| format!("cannot load keyfile {}: {why}", shown(path));
    let text = String::from_utf8_lossy(&pem);
    if let Some(block) = pem_block(&text, "ENCRYPTED PRIVATE KEY") {
        let Some(password) = password else {
            return Err(fail("the key is encrypted: set keyfile_password".into()));
        };
        let (_, doc) = pkcs8::SecretDocument::from_pem(block).map_err(|e| fail(e.to_string()))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes())
            .map_err(|e| fail(e.to_string()))?;
        let plain = info
            .decrypt(password)
            .map_err(|e| fail(format!("cannot decrypt it with keyfile_password ({e})")))?;
        return Ok(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec()).into());
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(fail(
            "a legacy encrypted PEM key, which -k rsgi cannot read: convert it to \
             encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)"
                .into(),
        ));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => fail("no PEM private key in it".into()),
        e => fail(e.to_string()),
    })
}

fn client_verifier(
    files: &TlsFiles<'_>,
) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, String> {
    let roots = match files.ca_certs {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("ca_certs", path)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("cannot load ca_certs {}: {e}", shown(path)))?;
            }
            Some(roots)
        }
        None => None,
    };
    if files.client_auth == ClientAuth::None {
        return Ok(None);
    }
    let Some(roots) = roots else {
        return Err(
            "cert_reqs asks for client certificates but ca_certs is not set: set ca_certs \
             to the CA certificates that sign them"
                .into(),
        );
    };
    let mut builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
    if files.client_auth == ClientAuth::Optional {
        builder = builder.allow_unauthenticated();
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| format!("cannot verify client certificates with ca_certs: {e}"))
}

/// The server side of TLS from the settings; `Err` is one line for the log.
pub fn load(files: &TlsFiles<'_>) -> Result<rustls::ServerConfig, String> {
    let chain = certificates("certfile", files.certfile)?;
    let key = private_key(files.keyfile.unwrap_or(files.certfile), files.password)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match client_verifier(files)? {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    builder.with_single_cert(chain, key).map_err(|e| {
        let key = files.keyfile.unwrap_or(files.certfile);
        format!(
            "cannot use certfile {} with keyfile {}: {e}",
            shown(files.certfile),
            shown(key)
        )
    })
}

/// The protocols offered through ALPN for `--http`.
pub fn with_alpn(config: &rustls::ServerConfig, mode: HttpMode) -> Arc<rustls::ServerConfig> {
    let mut config = config.clone();
    config.alpn_protocols = match mode {
        HttpMode::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        HttpMode::H1 => vec![b"http/1.1".to_vec()],
        HttpMode::H2 => vec![b"h2".to_vec()],
    };
    Arc::new(config)
}

/// What the handshake settled, for the app.
pub fn info<T>(stream: &TlsStream<T>) -> super::exchange::TlsInfo {
    let session = stream.get_ref().1;
    super::exchange::TlsInfo {
        version: session.protocol_version().map_or(0, u16::from),
        cipher_suite: session
            .negotiated_cipher_suite()
            .map_or(0, |suite| u16::from(suite.suite())),
        client_chain: session
            .peer_certificates()
            .map(|chain| chain.iter().map(|cert| cert.to_vec()).collect())
            .unwrap_or_default(),
    }
}

/// What ALPN settled: `Some(true)` for h2, `Some(false)` for http/1.1, `None`
/// when the client offered nothing we speak.
pub fn negotiated_h2<T>(stream: &TlsStream<T>) -> Option<bool> {
    match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Some(true),
        Some(b"http/1.1") => Some(false),
        _ => None,
    }
}

/// The handshake, bounded by `timeout` (a client that never finishes it
/// must not hold a connection); `None` when it fails or times out.
pub async fn handshake<T>(
    acceptor: TlsAcceptor,
    stream: T,
    timeout: Option<Duration>,
) -> Option<TlsStream<T>>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let accept = acceptor.accept(stream);
    match timeout {
        Some(t) => tokio::time::timeout(t, accept).await.ok()?.ok(),
        None => accept.await.ok(),
    }
}
