//! A minimal HTTP/1.1 client for benchmarking: one keep-alive connection per virtual client,
//! requests sent one after another on it, answers read whole.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// Where a server is and how to authenticate to it: `http://[user:password@]host:port`.
#[derive(Clone, Debug)]
pub struct Target {
    /// `host:port`.
    pub addr: String,
    /// The `Authorization` header, when the URL names a user.
    pub auth: Option<String>,
    /// The URL without credentials, for reports.
    pub display: String,
}

impl Target {
    /// Reads a URL. Only plain `http://` on a host and port is supported.
    pub fn parse(url: &str) -> Result<Target> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| Error::Url(url.into(), "only http:// URLs are supported"))?;
        let authority = rest.split('/').next().unwrap_or("");
        let (auth, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => {
                let decoded = percent_encoding::percent_decode_str(userinfo)
                    .decode_utf8_lossy()
                    .into_owned();
                (Some(format!("Basic {}", STANDARD.encode(decoded))), host)
            }
            None => (None, authority),
        };
        if host.is_empty() {
            return Err(Error::Url(url.into(), "no host"));
        }
        let addr = if host.contains(':') {
            host.to_string()
        } else {
            format!("{host}:80")
        };
        Ok(Target {
            display: format!("http://{host}"),
            addr,
            auth,
        })
    }
}

/// One keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    target: Target,
}

/// An answer: status and body.
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The whole body.
    pub body: Bytes,
}

impl Conn {
    /// Opens a connection to `target`.
    pub async fn open(target: &Target) -> Result<Conn> {
        let stream = TcpStream::connect(&target.addr)
            .await
            .map_err(|e| Error::Io(format!("connecting to {}: {e}", target.display)))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Error::Io(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            sender,
            target: target.clone(),
        })
    }

    /// Sends a request (a JSON body when given) and reads the whole answer.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Answer> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.target.addr)
            .header("accept", "application/json");
        if let Some(auth) = &self.target.auth {
            req = req.header("authorization", auth);
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| Error::Io(e.to_string()))?;
        if self.sender.is_closed() || self.sender.ready().await.is_err() {
            // The server closed the idle connection (Node servers do after 5 s): open another.
            *self = Conn::open(&self.target).await?;
        }
        self.sender
            .ready()
            .await
            .map_err(|e| Error::Io(e.to_string()))?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| Error::Io(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::Io(e.to_string()))?
            .to_bytes();
        Ok(Answer { status, body })
    }

    /// Like [`Conn::call`], failing unless the status is one of `ok`.
    pub async fn expect(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        ok: &[u16],
    ) -> Result<Answer> {
        let what = format!("{method} {path}");
        let answer = self.call(method, path, body).await?;
        if !ok.contains(&answer.status) {
            return Err(Error::WrongAnswer(format!(
                "{what}: status {} ({})",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_and_without_credentials() {
        let t = Target::parse("http://admin:p%40ss@127.0.0.1:5984/").unwrap();
        assert_eq!(t.addr, "127.0.0.1:5984");
        assert_eq!(
            t.auth.as_deref(),
            Some(format!("Basic {}", STANDARD.encode("admin:p@ss")).as_str())
        );
        assert_eq!(t.display, "http://127.0.0.1:5984");
        assert!(Target::parse("https://x").is_err());
        assert_eq!(
            Target::parse("http://localhost").unwrap().addr,
            "localhost:80"
        );
    }
}
