//! The server: shared state, the accept loop, authentication and routing.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Method;
use hyper_util::rt::TokioIo;
use settee_config::registry as setting;
use settee_node::{Node, Started};
use tokio::net::TcpListener;

use crate::auth::{self, Authenticator, User};
use crate::connections::{Answer, Conn, Connections, TimedBody, Watched};
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::{segments, Query, Req};
use crate::settings::Settings;
use crate::{access, att, bulk, changes, db, doc, node, view};

/// The version this server reports, and the CouchDB version whose API it speaks.
pub const VERSION: &str = "3.5.0";

/// The `Server` header on every answer: Settee's version and the CouchDB version it speaks.
pub const SERVER_HEADER: &str = concat!("Settee/", env!("CARGO_PKG_VERSION"), " (CouchDB/3.5.0)");

/// Everything requests share.
pub struct State {
    /// The node: databases, configuration, views, the document rules.
    pub node: Arc<Node>,
    /// Admin credential checks.
    pub auth: Authenticator,
    /// The welcome body, built once.
    pub welcome: Bytes,
    /// Server header value, built once.
    pub server_header: HeaderValue,
    /// The settings every request consults, parsed again when the config changes.
    pub settings: arc_swap::ArcSwap<Settings>,
    /// Failed logins per client address and user.
    pub lockout: settee_auth::lockout::Lockout,
    /// Cookie signing secret.
    pub secret: Vec<u8>,
    /// Largest request body (`[chttpd] max_http_request_size`).
    pub max_request: usize,
    /// Test hook: `/_settee_test_panic` panics inside its handler (set by the environment
    /// variable `SETTEE_TEST_PANIC=1` at start, for the test that a panic stays one 500).
    pub panic_route: bool,
    /// Every open connection (see [`crate::connections`]).
    pub connections: Arc<Connections>,
    /// The node's replications (`_replicate`, replicator databases, `_scheduler`); its
    /// scheduler runs once [`settee_replicator::Replicator::start`] is called.
    pub replicator: Arc<settee_replicator::Replicator>,
}

/// Where a server keeps its data and finds its configuration: the node's options.
pub use settee_node::NodeOptions as ServerOptions;

/// What preparing a server produced besides its state: an admin password generated on the
/// first start, to show once.
pub struct Prepared {
    /// Shared state.
    pub state: Arc<State>,
    /// `(name, password)` of an admin created with a generated password.
    pub generated_admin: Option<(String, String)>,
}

impl State {
    /// Starts the node (see [`Node::start`]) and builds what answering HTTP needs around it.
    pub fn prepare(opts: &ServerOptions, admin_env: Option<String>) -> Result<Prepared, String> {
        let Started {
            node,
            generated_admin,
        } = Node::start(opts, admin_env)?;
        // (Read before the configuration's lock is taken below: it takes it itself.)
        let sockets = crate::connections::socket_budget(node.database_files());
        let state = {
            let config = node.config.read().expect("config lock");
            let welcome = serde_json::json!({
                "couchdb": "Welcome",
                "version": VERSION,
                "git_sha": option_env!("SETTEE_GIT_SHA").unwrap_or("unknown"),
                "uuid": config.get("couchdb", "uuid"),
                // Only what is there: storage engines and resharding are not.
                "features": ["partitioned", "scheduler", "search", "nouveau"],
                "vendor": {"name": "Settee", "version": env!("CARGO_PKG_VERSION")},
            });
            let secret = config.get("chttpd_auth", "secret").unwrap_or_default();
            State {
                welcome: Bytes::from(serde_json::to_vec(&welcome).expect("json")),
                server_header: HeaderValue::from_static(SERVER_HEADER),
                secret: secret.as_bytes().to_vec(),
                max_request: config.value::<usize>(&setting::MAX_HTTP_REQUEST_SIZE),
                auth: Authenticator::default(),
                lockout: Default::default(),
                settings: arc_swap::ArcSwap::from_pointee(Settings::from_config(&config)),
                panic_route: std::env::var("SETTEE_TEST_PANIC").is_ok_and(|v| v == "1"),
                connections: Connections::new(sockets),
                replicator: settee_replicator::Replicator::new(node.clone()),
                node: node.clone(),
            }
        };
        Ok(Prepared {
            state: Arc::new(state),
            generated_admin,
        })
    }

    /// Applies the HTTP settings of the configuration (after the node applied its own, see
    /// [`Node::apply_config`]).
    pub fn apply_config(&self) {
        let config = self.node.config.read().expect("config lock");
        self.settings
            .store(Arc::new(Settings::from_config(&config)));
    }

    /// Takes in the configuration file again, as `POST /_node/_local/_config/_reload`
    /// does (and SIGHUP).
    pub fn reload_config(&self) -> HttpResult<()> {
        self.node.reload_config()?;
        self.apply_config();
        Ok(())
    }

    /// Stops serving, for a server asked to stop (the listeners already closed): connections
    /// waiting for a request close, requests being answered finish (for up to `limit`),
    /// then what `batch=ok` left uncommitted is committed in every open database. Whether
    /// every connection closed in time.
    pub async fn shutdown(&self, limit: std::time::Duration) -> bool {
        let drained = self.connections.drain(limit).await;
        let node = self.node.clone();
        let flushed = tokio::task::spawn_blocking(move || {
            for db in node.catalog.open_databases() {
                if let Err(e) = db.flush() {
                    tracing::error!(db = db.name(), error = %e, "committing at shutdown failed");
                }
            }
        })
        .await;
        if flushed.is_err() {
            tracing::error!("committing at shutdown failed");
        }
        drained
    }

    /// The account named `name` (a server admin, or a user of the users database).
    pub fn account(&self, name: &str) -> Option<auth::Account> {
        auth::account(
            &self.node.config.read().expect("config lock"),
            &self.node.catalog,
            name,
        )
    }

    /// Who is asking, by the configured handlers in order (`[chttpd]
    /// authentication_handlers`; cookie then Basic by default, JWT and proxy when listed).
    async fn authenticate(
        self: &Arc<Self>,
        headers: &hyper::HeaderMap,
        peer: std::net::IpAddr,
        tls: bool,
    ) -> HttpResult<Authenticated> {
        let settings = self.settings.load();
        for &handler in settings.handlers.iter() {
            let found = match handler {
                "default" => self.basic(headers, peer).await?,
                "cookie" => self.cookie(headers, tls)?,
                "jwt" => self.jwt(headers)?,
                "proxy" => self.proxy(headers),
                _ => None,
            };
            if let Some((user, refresh)) = found {
                return Ok(Authenticated {
                    user: Some(user),
                    handler: Some(handler),
                    refresh,
                });
            }
        }
        Ok(Authenticated::default())
    }

    /// Basic credentials, verified off the event loop the first time.
    async fn basic(
        self: &Arc<Self>,
        headers: &hyper::HeaderMap,
        peer: std::net::IpAddr,
    ) -> HttpResult<Option<(User, Option<String>)>> {
        let Some(h) = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .filter(|h| h.starts_with("Basic ") || h.starts_with("basic "))
        else {
            return Ok(None);
        };
        // Credentials verified before are recognised by the header alone.
        if let Some(user) = self.auth.cached(h, |n, f| {
            auth::revalidate(&self.settings.load(), n, f, || self.account(n))
        }) {
            // A locked account is refused however its password was checked.
            if self.lockout.any() {
                self.check_lockout(
                    peer,
                    &lockout_key(&user.name, self.account(&user.name).as_ref()),
                )?;
            }
            return Ok(Some((user, None)));
        }
        let Some((name, password)) = auth::parse_basic(h) else {
            return Err(HttpError::bad_request(
                "Authorization header has invalid base64 value",
            ));
        };
        if name == "_" && password == "_" {
            return Ok(None);
        }
        let (state, header) = (self.clone(), h.to_string());
        // As CouchDB's, Basic failures for a name no account has do not count.
        let user = tokio::task::spawn_blocking(move || {
            state.guarded_login(peer, &name, false, |account| {
                state.auth.verify(&header, &password, account)
            })
        })
        .await
        .map_err(|_| HttpError::new(500, "unknown_error", "login failed"))??;
        Ok(Some((user, None)))
    }

    /// Checks a login for `name` from `peer` under the lockout (blocking: it looks the account
    /// up and derives the password): `check` says who the account's password makes the
    /// caller, if anyone. A locked account is refused before any derivation; a failure is
    /// recorded against the account (and, if `counts_unknown`, against a name no account has).
    pub fn guarded_login<T>(
        &self,
        peer: std::net::IpAddr,
        name: &str,
        counts_unknown: bool,
        check: impl FnOnce(Option<auth::Account>) -> Option<T>,
    ) -> HttpResult<T> {
        let account = self.account(name);
        let key =
            (account.is_some() || counts_unknown).then(|| lockout_key(name, account.as_ref()));
        if let Some(key) = &key {
            self.check_lockout(peer, key)?;
        }
        match check(account) {
            Some(found) => Ok(found),
            None => {
                if let Some(key) = &key {
                    self.login_failed(peer, key);
                }
                Err(HttpError::new(
                    401,
                    "unauthorized",
                    "Name or password is incorrect.",
                ))
            }
        }
    }

    /// `[chttpd_auth_lockout]`: `mode` (`enforce`, `warn` or `off`), `threshold`, `max_lifetime` (ms).
    fn lockout_policy(&self) -> (String, settee_auth::lockout::Policy) {
        let config = self.node.config.read().expect("config lock");
        let policy = settee_auth::lockout::Policy {
            threshold: config.value(&setting::LOCKOUT_THRESHOLD),
            lifetime_ms: config.value(&setting::LOCKOUT_MAX_LIFETIME),
            max_entries: config.value(&setting::LOCKOUT_MAX_OBJECTS),
        };
        (
            config
                .get("chttpd_auth_lockout", "mode")
                .unwrap_or("enforce")
                .to_string(),
            policy,
        )
    }

    /// Refuses a login attempt for the account `key` ([`lockout_key`]) from `peer` while that
    /// pair is locked out.
    fn check_lockout(&self, peer: std::net::IpAddr, key: &str) -> HttpResult<()> {
        if !self.lockout.any() {
            return Ok(());
        }
        let (mode, policy) = self.lockout_policy();
        if mode != "off" && self.lockout.locked(peer, key, auth::now_ms(), policy) {
            if mode == "enforce" {
                return Err(HttpError::new(
                    403,
                    "forbidden",
                    "Account is temporarily locked due to multiple authentication failures",
                ));
            }
            let user = key.split('\n').next().unwrap_or("");
            tracing::warn!(user, %peer, "repeated authentication failures");
        }
        Ok(())
    }

    /// Records a failed login attempt against the account `key`.
    fn login_failed(&self, peer: std::net::IpAddr, key: &str) {
        let (mode, policy) = self.lockout_policy();
        if mode != "off" {
            self.lockout.failed(peer, key, auth::now_ms(), policy);
        }
    }

    /// An `AuthSession` cookie, with a fresh cookie to send back once the old one has aged.
    fn cookie(
        &self,
        headers: &hyper::HeaderMap,
        tls: bool,
    ) -> HttpResult<Option<(User, Option<String>)>> {
        let cookie = headers
            .get_all(hyper::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|c| c.trim().strip_prefix("AuthSession=").map(str::to_string));
        let Some(cookie) = cookie.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        if settee_auth::cookie::is_malformed(&cookie) {
            return Err(HttpError::bad_request(
                "Malformed AuthSession cookie. Please clear your cookies.",
            ));
        }
        let Some((name, _)) = settee_auth::cookie::claims(&cookie) else {
            return Ok(None);
        };
        let Some(account) = self.account(&name) else {
            return Ok(None);
        };
        let attrs = self.cookie_attributes(tls);
        let (now, fingerprint) = (auth::now(), account.fingerprint());
        let Some(age) =
            settee_auth::cookie::check(&self.secret, &fingerprint, &cookie, attrs.timeout, now)
        else {
            return Ok(None);
        };
        let refresh = settee_auth::cookie::needs_refresh(age, attrs.timeout).then(|| {
            settee_auth::cookie::header(
                &settee_auth::cookie::make(&self.secret, &fingerprint, &name, now),
                &attrs,
                now,
            )
        });
        Ok(Some((account.user, refresh)))
    }

    /// `Authorization: Bearer <JWT>`: a refused token is an error, not anonymity.
    fn jwt(&self, headers: &hyper::HeaderMap) -> HttpResult<Option<(User, Option<String>)>> {
        let Some(token) = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
        else {
            return Ok(None);
        };
        let cfg = auth::jwt_config(&self.node.config.read().expect("config lock"));
        match settee_auth::jwt::verify(token.trim(), &cfg) {
            Ok(user) => Ok(Some((user, None))),
            Err(settee_auth::jwt::JwtError::BadRequest(r)) => Err(HttpError::bad_request(r)),
            Err(settee_auth::jwt::JwtError::Unauthorized(r)) => {
                Err(HttpError::new(401, "unauthorized", r))
            }
        }
    }

    /// Proxy headers, trusted as given unless `[chttpd_auth] proxy_use_secret` asks for a
    /// token; a wrong token passes the request on to the next handler.
    fn proxy(&self, headers: &hyper::HeaderMap) -> Option<(User, Option<String>)> {
        let config = self.node.config.read().expect("config lock");
        let header = |key: &str, default: &str| {
            config
                .get("chttpd_auth", key)
                .unwrap_or(default)
                .to_ascii_lowercase()
        };
        let text = |name: String| headers.get(name.as_str()).and_then(|v| v.to_str().ok());
        let name = text(header("x_auth_username", "X-Auth-CouchDB-UserName"))?.to_string();
        let roles = settee_auth::proxy::roles(text(header("x_auth_roles", "X-Auth-CouchDB-Roles")));
        if config.value::<bool>(&setting::PROXY_USE_SECRET) {
            let token = text(header("x_auth_token", "X-Auth-CouchDB-Token")).unwrap_or("");
            if !settee_auth::proxy::token_matches(&self.secret, &name, token) {
                return None;
            }
        }
        Some((User { name, roles }, None))
    }

    /// How session cookies are set: `[chttpd_auth] timeout`, `allow_persistent_cookies`,
    /// `cookie_domain`, `same_site`; `Secure` over TLS.
    pub fn cookie_attributes(&self, tls: bool) -> settee_auth::cookie::Attributes {
        let config = self.node.config.read().expect("config lock");
        let text = |k: &str| {
            config
                .get("chttpd_auth", k)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let same_site = text("same_site").and_then(|s| match s.to_ascii_lowercase().as_str() {
            "none" => Some("None".to_string()),
            "lax" => Some("Lax".to_string()),
            "strict" => Some("Strict".to_string()),
            _ => None,
        });
        settee_auth::cookie::Attributes {
            timeout: config.value(&setting::TIMEOUT),
            persistent: config.value::<bool>(&setting::ALLOW_PERSISTENT_COOKIES),
            secure: tls,
            domain: text("cookie_domain"),
            same_site,
        }
    }
}

/// The outcome of authentication: the user, the handler that named them, and a renewed
/// session cookie to send back.
#[derive(Default)]
struct Authenticated {
    user: Option<User>,
    handler: Option<&'static str>,
    refresh: Option<String>,
}

/// Accepts connections for as long as the server runs (failures to accept are retried, see
/// [`accept`]).
pub async fn serve(listener: TcpListener, state: Arc<State>) -> std::convert::Infallible {
    loop {
        let (stream, peer, conn) = accept_registered(&listener, &state).await;
        let stream = Watched::new(stream, conn.clone(), state.settings.load().conn);
        tokio::spawn(serve_connection(
            stream,
            conn,
            state.clone(),
            peer.ip(),
            false,
        ));
    }
}

/// The next connection, once there is room for it (see [`Connections::room`]), registered;
/// the caller watches its byte stream for clients that keep it waiting ([`Watched`]).
pub(crate) async fn accept_registered(
    listener: &TcpListener,
    state: &State,
) -> (tokio::net::TcpStream, SocketAddr, Arc<Conn>) {
    state.connections.room(state.settings.load().conn.max).await;
    let (stream, peer) = accept(listener).await;
    (stream, peer, state.connections.register())
}

/// The next connection, with Nagle's delay off. Failing to accept one (out of file descriptors under a flood of
/// connections, or a client that gave up) must not stop the server: the error is logged and,
/// since running out of descriptors lasts a while, the listener pauses briefly.
pub(crate) async fn accept(listener: &TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    let mut failures = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                return (stream, peer);
            }
            Err(e) => {
                // Logged once, then once a second while it lasts.
                if failures.is_multiple_of(50) {
                    tracing::warn!(
                        "accepting a connection failed ({} times in a row): {e}",
                        failures + 1
                    );
                }
                failures += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

/// Serves HTTP/1.1 requests on one connection (plain or TLS) until it closes.
pub async fn serve_connection<I>(
    io: I,
    conn: Arc<Conn>,
    state: Arc<State>,
    peer: std::net::IpAddr,
    tls: bool,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // The peer as the access lines write it, worked out once for the connection's requests.
    let peer = Peer {
        ip: peer,
        text: peer.to_string().into(),
    };
    let service = service_fn(move |req| {
        let (state, conn, peer) = (state.clone(), conn.clone(), peer.clone());
        async move {
            conn.begin_request();
            let resp = handle(state, req, peer, tls, conn.clone()).await;
            Ok::<_, std::convert::Infallible>(resp.map(|body| Answer::new(body, conn)))
        }
    });
    let _ = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// What the lockout counts failures against: the name and the account's current credentials
/// (as CouchDB keys it by name and salt), so that failures recorded against a name do not
/// lock out an account made, or a password set, later.
fn lockout_key(name: &str, account: Option<&auth::Account>) -> String {
    format!(
        "{name}\n{}",
        account.map(auth::Account::fingerprint).unwrap_or_default()
    )
}

/// `X-Couch-Request-ID`, on every answer.
const REQUEST_ID: HeaderName = HeaderName::from_static("x-couch-request-id");
/// `X-CouchDB-Body-Time`: how long reading the request body took, on every answer.
const BODY_TIME: HeaderName = HeaderName::from_static("x-couchdb-body-time");
/// `X-CouchDB-WWW-Authenticate`: the `WWW-Authenticate` a client asks for on a 401.
const ASKED_WWW_AUTHENTICATE: HeaderName = HeaderName::from_static("x-couchdb-www-authenticate");

/// A connection's peer: its address, and that address as text.
#[derive(Clone)]
struct Peer {
    ip: std::net::IpAddr,
    text: Arc<str>,
}

/// Answers one request. A handler that panics is answered with a logged 500.
async fn handle(
    state: Arc<State>,
    req: hyper::Request<Incoming>,
    peer: Peer,
    tls: bool,
    conn: Arc<Conn>,
) -> Response {
    let started = std::time::Instant::now();
    settee_metrics::inc(settee_metrics::Metric::HttpdRequests);
    if let Some(m) = settee_metrics::Metric::method(req.method().as_str()) {
        settee_metrics::inc(m);
    }
    let server_header = state.server_header.clone();
    let origin = req
        .headers()
        .get(hyper::header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_string);
    let asked_www = req.headers().get(&ASKED_WWW_AUTHENTICATE).cloned();
    let state_after = state.clone();
    let cors = origin.as_ref().and_then(|_| {
        crate::cors::Cors::from_config(&state.node.config.read().expect("config lock"))
    });
    if let Some(preflight) = cors
        .as_ref()
        .filter(|_| req.method() == Method::OPTIONS)
        .and_then(|c| c.preflight(req.headers()))
    {
        let mut resp = preflight;
        resp.headers_mut().insert(SERVER, server_header);
        return resp;
    }
    let head_request = req.method() == Method::HEAD;
    let (method, uri) = (req.method().clone(), req.uri().clone());
    // What the access line needs, taken only when access lines are logged.
    let access = tracing::enabled!(target: ACCESS_LOG, tracing::Level::INFO).then(|| {
        let host = req.headers().get(hyper::header::HOST);
        host.and_then(|h| h.to_str().ok())
            .unwrap_or("-")
            .to_string()
    });
    let mut resp = match (CatchPanic {
        inner: Box::pin(dispatch(state, req, peer.ip, tls, conn)),
    })
    .await
    {
        Ok(Ok(resp)) => resp,
        Ok(Err(e)) => reply::error(&e),
        Err(message) => {
            tracing::error!(%method, %uri, panic = %message, "request handler panicked");
            reply::error(&HttpError::new(
                500,
                "unknown_error",
                "the request handler failed",
            ))
        }
    };
    if head_request {
        use http_body_util::BodyExt;
        use hyper::body::Body as _;
        let len = resp.body().size_hint().exact();
        let (mut parts, _) = resp.into_parts();
        if let Some(len) = len {
            parts
                .headers
                .insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        resp = hyper::Response::from_parts(parts, http_body_util::Empty::new().boxed());
    }
    resp.headers_mut().insert(SERVER, server_header);
    let id = request_id();
    if let Some(host) = access {
        log_access(&resp, &id, &host, &peer.text, &method, &uri, started);
    }
    resp.headers_mut().insert(REQUEST_ID, id);
    if let (Some(cors), Some(origin)) = (&cors, &origin) {
        cors.decorate(origin, &mut resp);
    }
    if resp.status() == hyper::StatusCode::UNAUTHORIZED {
        if let Some(v) = access::www_authenticate(&state_after, asked_www)
            .and_then(|v| HeaderValue::from_str(&v).ok())
        {
            resp.headers_mut()
                .insert(hyper::header::WWW_AUTHENTICATE, v);
        }
    }
    if let Some(m) = settee_metrics::Metric::status(resp.status().as_u16()) {
        settee_metrics::inc(m);
    }
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    settee_metrics::observe(settee_metrics::Metric::RequestTime, millis);
    resp
}

/// The target of the access lines (one per request, at CouchDB's `notice`).
pub const ACCESS_LOG: &str = "settee::access";

/// Who made a request, noted on its response for the access line.
#[derive(Clone)]
struct Requester(String);

/// CouchDB's access line: request id, `Host`, peer, user (`undefined` when anonymous),
/// method, path with query, status, `ok` and milliseconds. Credentials never appear: they
/// travel in headers and bodies, which are not logged.
fn log_access(
    resp: &Response,
    id: &HeaderValue,
    host: &str,
    peer: &str,
    method: &Method,
    uri: &hyper::Uri,
    started: std::time::Instant,
) {
    if !tracing::enabled!(target: ACCESS_LOG, tracing::Level::INFO) {
        return;
    }
    let user = resp
        .extensions()
        .get::<Requester>()
        .map_or("undefined", |r| r.0.as_str());
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    // Put together here, where most of it is already text: one argument for the line.
    let mut line = String::with_capacity(80 + host.len() + user.len() + path.len());
    for part in [id.to_str().unwrap_or("-"), " ", host, " "] {
        line.push_str(part);
    }
    for part in [peer, " ", user, " ", method.as_str(), " ", path, " "] {
        line.push_str(part);
    }
    line.push_str(resp.status().as_str());
    let _ = write!(line, " ok {}", started.elapsed().as_millis());
    match ACCESS_WRITER.get() {
        Some(write) => write(&line),
        // For a process that installed no writer (one embedding the server with its own
        // subscriber): the line as an event, for that subscriber to format.
        None => tracing::info!(target: ACCESS_LOG, "{line}"),
    }
}

/// The writer of access lines the process installed ([`set_access_writer`]), if any.
static ACCESS_WRITER: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Hands each access line to `write` instead of logging it as an `info` event of
/// [`ACCESS_LOG`] (whether lines are written at all is still that event's filter's to say):
/// the line is logged for every request, and an event's dispatch and formatting cost more
/// than a small request's own work in some places. Only the first call counts.
pub fn set_access_writer(write: fn(&str)) {
    let _ = ACCESS_WRITER.set(write);
}

/// Ten random lowercase hex digits, as CouchDB's `X-Couch-Request-ID`.
fn request_id() -> HeaderValue {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(rand::random::<u64>() | 1);
    }
    // xorshift64*: request ids need to differ, not to be secret.
    let n = STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    });
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 10];
    for (i, b) in out.iter_mut().enumerate() {
        *b = HEX[((n >> (4 * i)) & 15) as usize];
    }
    HeaderValue::from_bytes(&out).expect("hex is a valid header value")
}

/// Runs a request's future, turning a panic into an error for that request alone (the
/// connection and every other request go on).
struct CatchPanic<F> {
    inner: std::pin::Pin<Box<F>>,
}

impl<F: std::future::Future> std::future::Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.inner.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                std::task::Poll::Ready(Err(message))
            }
        }
    }
}

async fn dispatch(
    state: Arc<State>,
    req: hyper::Request<Incoming>,
    peer: std::net::IpAddr,
    tls: bool,
    conn: Arc<Conn>,
) -> HttpResult<Response> {
    let (parts, body) = req.into_parts();
    let Authenticated {
        user,
        handler,
        refresh,
    } = state.authenticate(&parts.headers, peer, tls).await?;
    let raw_path = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    let mut req = Req {
        method: parts.method,
        segments: segments(parts.uri.path()),
        raw_path,
        preread: None,
        rewrites: 0,
        query: Query::parse(parts.uri.query()),
        headers: parts.headers,
        body: Some(TimedBody::new(body, state.settings.load().conn.body, conn)),
        user,
        auth_handler: handler,
        peer,
        tls,
        body_time: std::time::Duration::ZERO,
    };
    let mut resp = route(&state, &mut req)
        .await
        .unwrap_or_else(|e| reply::error(&e));
    // An answer given before the body was read (a refusal, say) leaves the rest of that body
    // on the connection: it is closed after the answer, and the answer says so, so that no
    // client sends its next request on a connection about to go.
    if req
        .body
        .as_ref()
        .is_some_and(|b| !hyper::body::Body::is_end_stream(b))
    {
        resp.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    let body_ms = req.body_time.as_millis() as u64;
    let body_time = if body_ms == 0 {
        HeaderValue::from_static("0")
    } else {
        HeaderValue::from(body_ms)
    };
    resp.headers_mut().insert(BODY_TIME, body_time);
    if let Some(cookie) =
        refresh.filter(|_| !resp.headers().contains_key(hyper::header::SET_COOKIE))
    {
        resp = reply::with_header(resp, hyper::header::SET_COOKIE, &cookie);
    }
    if let Some(user) = &req.user {
        resp.extensions_mut().insert(Requester(user.name.clone()));
    }
    Ok(resp)
}

pub(crate) async fn route(state: &Arc<State>, req: &mut Req) -> HttpResult<Response> {
    let first = req.segments.first().cloned();
    if req.user.is_none() && access::requires_valid_user(state, first.as_deref(), &req.method) {
        return Err(HttpError::new(
            401,
            "unauthorized",
            "Authentication required.",
        ));
    }
    match first.as_deref() {
        None => node::welcome(state, req),
        Some("_up") => node::up(req),
        // The admin UI is static and public: it asks who you are through `_session`.
        Some("_utils") => crate::utils::utils(state, req),
        Some("_settee_test_panic") if state.panic_route => panic!("test panic requested"),
        Some("_uuids") => node::uuids(state, req),
        Some("_session") => Box::pin(node::session(state, req)).await,
        Some("_all_dbs" | "_dbs_info")
            if !state
                .node
                .config
                .read()
                .expect("config lock")
                .value::<bool>(&setting::ADMIN_ONLY_ALL_DBS) =>
        {
            Box::pin(node::route(state, req)).await
        }
        // Anyone may ask for a replication; it reads and writes as they may (CouchDB's rule).
        Some("_replicate") => Box::pin(crate::replicate::replicate(state, req)).await,
        Some(name) if name.starts_with('_') && !settee_db::SYSTEM_DATABASES.contains(&name) => {
            access::server_admin(req)?;
            Box::pin(node::route(state, req)).await
        }
        Some(name) => {
            let name = name.to_string();
            access::check_db_request(state, req, &name)?;
            db_route(state, req, &name).await
        }
    }
}

async fn db_route(state: &Arc<State>, req: &mut Req, name: &str) -> HttpResult<Response> {
    let second = req.segments.get(1).cloned();
    let Some(second) = second else {
        return Box::pin(db::handle(state, req, name)).await;
    };
    let rest = req.segments.len();
    match second.as_str() {
        "_all_docs" | "_design_docs" | "_local_docs" if rest == 2 => {
            Box::pin(db::all_docs(state, req, name, &second)).await
        }
        "_all_docs" | "_design_docs" | "_local_docs"
            if rest == 3 && req.segments[2] == "queries" =>
        {
            Box::pin(db::all_docs_queries(state, req, name, &second)).await
        }
        "_bulk_docs" if rest == 2 => Box::pin(bulk::bulk_docs(state, req, name)).await,
        "_bulk_get" if rest == 2 => Box::pin(bulk::bulk_get(state, req, name)).await,
        "_revs_diff" if rest == 2 => Box::pin(bulk::revs_diff(state, req, name, false)).await,
        "_missing_revs" if rest == 2 => Box::pin(bulk::revs_diff(state, req, name, true)).await,
        "_changes" if rest == 2 => Box::pin(changes::handle(state, req, name)).await,
        "_revs_limit" | "_security" | "_purged_infos_limit" if rest == 2 => {
            Box::pin(db::meta(state, req, name, &second)).await
        }
        "_compact" | "_ensure_full_commit" | "_view_cleanup" | "_purge" if rest == 2 => {
            Box::pin(db::maintenance(state, req, name, &second)).await
        }
        "_compact" if rest == 3 => {
            let ddoc = req.segments[2].clone();
            view::compact(state, req, name, &ddoc)
        }
        "_design" if rest == 4 && req.segments[3] == "_info" => {
            let ddoc = req.segments[2].clone();
            view::info(state, req, name, &ddoc)
        }
        "_design" if (rest == 5 || rest == 6) && req.segments[3] == "_view" => {
            let (ddoc, v) = (req.segments[2].clone(), req.segments[4].clone());
            match req.segments.get(5).map(String::as_str) {
                None => Box::pin(view::view(state, req, name, &ddoc, &v)).await,
                Some("queries") => Box::pin(view::queries(state, req, name, &ddoc, &v)).await,
                Some(_) => Err(HttpError::not_found("missing")),
            }
        }
        "_design" | "_local" if rest == 3 => {
            let id = format!("{second}/{}", req.segments[2]);
            doc_route(state, req, name, &id).await
        }
        "_design" if rest >= 4 && req.segments[3] == "_rewrite" => {
            let ddoc = req.segments[2].clone();
            Box::pin(crate::rewrite::rewrite(state, req, name, &ddoc)).await
        }
        "_design"
            if rest >= 4 && matches!(req.segments[3].as_str(), "_show" | "_list" | "_update") =>
        {
            let (ddoc, kind) = (req.segments[2].clone(), req.segments[3].clone());
            let rest: Vec<String> = req.segments[4..].to_vec();
            match kind.as_str() {
                "_show" => Box::pin(crate::render::show(state, req, name, &ddoc, &rest)).await,
                "_list" => Box::pin(crate::render::list(state, req, name, &ddoc, &rest)).await,
                _ => Box::pin(crate::render::update(state, req, name, &ddoc, &rest)).await,
            }
        }
        "_design" if rest == 5 && matches!(req.segments[3].as_str(), "_search" | "_nouveau") => {
            let (ddoc, index) = (req.segments[2].clone(), req.segments[4].clone());
            if req.segments[3] == "_search" {
                Box::pin(crate::search::search(state, req, name, &ddoc, &index)).await
            } else {
                Box::pin(crate::search::nouveau(state, req, name, &ddoc, &index)).await
            }
        }
        "_design"
            if rest == 5
                && matches!(
                    req.segments[3].as_str(),
                    "_search_info" | "_search_disk_size" | "_nouveau_info"
                ) =>
        {
            let (ddoc, index) = (req.segments[2].clone(), req.segments[4].clone());
            crate::search::info(state, req, name, &ddoc, &index, &req.segments[3])
        }
        "_design"
            if rest >= 4
                && matches!(
                    req.segments[3].as_str(),
                    "_search" | "_search_info" | "_search_disk_size" | "_nouveau" | "_nouveau_info"
                ) =>
        {
            Err(HttpError::bad_request("path not recognized"))
        }
        "_design" if rest >= 4 => {
            let (id, att) = (
                format!("_design/{}", req.segments[2]),
                req.segments[3..].join("/"),
            );
            Box::pin(att::handle(state, req, name, &id, &att)).await
        }
        "_local" | "_local/" if rest == 2 => {
            Err(HttpError::bad_request("Invalid _local document id."))
        }
        "_local" if rest >= 4 => Err(HttpError::bad_request(
            "_local documents do not accept attachments.",
        )),
        "_find" if rest == 2 => Box::pin(crate::find::find(state, req, name, None)).await,
        "_explain" if rest == 2 => Box::pin(crate::find::explain(state, req, name, None)).await,
        "_index" => Box::pin(crate::find::index(state, req, name)).await,
        "_partition" => Box::pin(crate::partition::route(state, req, name)).await,
        "_search_cleanup" | "_nouveau_cleanup" if rest == 2 => {
            Box::pin(crate::search::cleanup(state, req, name, &second)).await
        }
        "_find" | "_explain" | "_shards" | "_sync_shards" => Err(unbuilt_db_endpoint(req, &second)),
        // Any other name is a document's, as in CouchDB (an `_design%2Fx` segment included):
        // reads find nothing by an id that cannot be made, writes are refused it.
        _ if rest == 2 => doc_route(state, req, name, &second).await,
        _ => {
            let att = req.segments[2..].join("/");
            Box::pin(att::handle(state, req, name, &second, &att)).await
        }
    }
}

/// Documents: reads are answered without another future (the hottest path).
async fn doc_route(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    id: &str,
) -> HttpResult<Response> {
    if req.method == Method::GET || req.method == Method::HEAD {
        return doc::get(state, req, name, id);
    }
    Box::pin(doc::handle(state, req, name, id)).await
}

/// A database endpoint Settee does not have, refused as [`node::unbuilt`] refuses, with the
/// methods of CouchDB's handler for it.
fn unbuilt_db_endpoint(req: &Req, endpoint: &str) -> HttpError {
    let methods = if endpoint == "_shards" { "GET" } else { "POST" };
    node::unbuilt(req, endpoint, methods)
}
