//! A minimal HTTP/1.1 client for benchmarking: one keep-alive connection per virtual client,
//! requests sent one after another on it, answers read whole. Each connection is driven by
//! the task that asks, not by a task of its own: a request then costs no hand-off between
//! threads, which on a fast server is a large part of one request's time.

use std::pin::Pin;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, Connection, SendRequest};
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

/// The socket side of a connection, which must be polled for requests to go and answers
/// to come.
type Link = Pin<Box<Connection<TokioIo<TcpStream>, Full<Bytes>>>>;

/// One keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    /// `None` once it has ended (the server closed it).
    link: Option<Link>,
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
        let (sender, link) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Error::Io(e.to_string()))?;
        Ok(Conn {
            sender,
            link: Some(Box::pin(link)),
            target: target.clone(),
        })
    }

    /// Whether the connection has ended: its link is polled once, so that a close the
    /// server sent while it was idle is seen now.
    async fn ended(&mut self) -> bool {
        if let Some(link) = self.link.as_mut() {
            let closed = tokio::select! {
                biased;
                _ = link.as_mut() => true,
                () = std::future::ready(()) => false,
            };
            if closed {
                self.link = None;
            }
        }
        self.link.is_none() || self.sender.is_closed()
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
        if self.ended().await {
            // The server closed the idle connection (Node servers do after 5 s): open another.
            *self = Conn::open(&self.target).await?;
        }
        let sender = &mut self.sender;
        let exchange = async move {
            sender.ready().await?;
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>(Answer { status, body })
        };
        tokio::pin!(exchange);
        // The link is polled beside the exchange; an answer is `None` if the link ended first.
        let answer = match self.link.as_mut() {
            Some(link) => tokio::select! {
                biased;
                answer = &mut exchange => Some(answer),
                _ = link.as_mut() => None,
            },
            None => None,
        };
        let answer = match answer {
            Some(answer) => answer,
            None => {
                // Dropping an ended link fails whatever the exchange still waits on.
                self.link = None;
                exchange.await
            }
        };
        answer.map_err(|e| Error::Io(e.to_string()))
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

    /// A server that answers each connection's first request and then closes it, as
    /// servers that drop idle connections do; what each connection was asked.
    async fn one_answer_per_connection() -> (Target, tokio::task::JoinHandle<Vec<String>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = Target::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let server = tokio::spawn(async move {
            let mut asked = Vec::new();
            for _ in 0..3 {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                asked.push(head.lines().next().unwrap_or_default().to_string());
                let body = format!("{{\"n\":{}}}", asked.len());
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                s.write_all(reply.as_bytes()).await.unwrap();
                s.shutdown().await.unwrap();
            }
            asked
        });
        (target, server)
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_opened_again() {
        let (target, server) = one_answer_per_connection().await;
        let mut c = Conn::open(&target).await.unwrap();
        for n in 1..=3 {
            let a = c.call(Method::GET, &format!("/{n}"), None).await.unwrap();
            assert_eq!(a.status, 200);
            assert_eq!(a.body, format!("{{\"n\":{n}}}"));
            // Let the close arrive while the connection is idle.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(
            server.await.unwrap(),
            ["GET /1 HTTP/1.1", "GET /2 HTTP/1.1", "GET /3 HTTP/1.1"]
        );
    }
}
