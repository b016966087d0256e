//! HTTPS (`[ssl] enable, port, cert_file, key_file`): the same API on a second port, with
//! TLS from rustls.

use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::server::{serve_connection, State};

/// A TLS acceptor for the PEM certificate chain and private key in these files.
pub fn acceptor(cert_file: &str, key_file: &str) -> Result<TlsAcceptor, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| format!("reading {cert_file}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading {cert_file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{cert_file} holds no certificate"));
    }
    let key =
        PrivateKeyDer::from_pem_file(key_file).map_err(|e| format!("reading {key_file}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("the certificate and key do not fit: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts TLS connections for as long as the server runs; a failed handshake drops only that
/// connection.
pub async fn serve_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    state: Arc<State>,
) -> std::convert::Infallible {
    loop {
        let (stream, peer, conn) = crate::server::accept_registered(&listener, &state).await;
        let (acceptor, state) = (acceptor.clone(), state.clone());
        tokio::spawn(async move {
            let handshake =
                tokio::time::timeout(std::time::Duration::from_secs(30), acceptor.accept(stream))
                    .await;
            // Watched above TLS, so that the handshake's bytes do not count as a request's.
            if let Ok(Ok(tls)) = handshake {
                let tls =
                    crate::connections::Watched::new(tls, conn.clone(), state.settings.load().conn);
                serve_connection(tls, conn, state, peer.ip(), true).await;
            }
        });
    }
}
