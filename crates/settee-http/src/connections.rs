//! The server's connections: how many may be open, how long one may wait between requests or
//! take to send one, and which gives way when there are too many.
//!
//! A client that opens a socket and sends nothing, or part of a request head, or a body byte
//! by byte, must not keep the socket for ever, nor let a crowd of such clients exhaust the
//! process's file descriptors (the databases need theirs too). So:
//!
//! * a connection waiting for a request may wait [`ConnLimits::idle`] for its first byte, then
//!   has [`ConnLimits::header`] to finish the head ([`Watched`] ends it otherwise);
//! * a request's body may pause at most [`ConnLimits::body`] between bytes ([`TimedBody`]);
//! * at most [`ConnLimits::max`] connections are open, and never more than the descriptors
//!   left after a reserve kept for database files ([`socket_budget`]). At the limit, a
//!   connection waiting for a request is closed to make room (one trickling a head first,
//!   then the one idle longest); if every one is in a request, accepting pauses until one
//!   closes. Clients in a request, or whose whole request head has arrived, are never cut.
//!
//! Nothing limits a request while it is being answered (a continuous change feed may last
//! for days): the limits apply only while the server waits for what the client must send.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long a client may take, and how many may be connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Longest wait for the first byte of a request, on a new connection or between requests
    /// (`[chttpd] idle_timeout`, ms; CouchDB's server waits five minutes).
    pub idle: Duration,
    /// Longest time from a request's first byte to the end of its head (`[chttpd]
    /// header_timeout`, ms; CouchDB's allows 30 seconds a header line).
    pub header: Duration,
    /// Longest pause between bytes of a request body (`[chttpd] body_timeout`, ms; five
    /// minutes, as CouchDB's).
    pub body: Duration,
    /// Most connections open at once (`[chttpd] max_connections`; CouchDB's 65,536), further
    /// bounded by [`socket_budget`].
    pub max: usize,
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits {
            idle: Duration::from_secs(300),
            header: Duration::from_secs(30),
            body: Duration::from_secs(300),
            max: 65_536,
        }
    }
}

/// How many sockets the process may hold: its open-files limit less a reserve for database
/// and index files, so that no crowd of clients can leave a database unable to open. The
/// reserve is what the open databases may hold (`database_files`), within a quarter and a
/// half of the limit, and at least 128.
pub fn socket_budget(database_files: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur as usize
    } else {
        1024
    };
    let reserve = database_files.clamp(files / 4, files / 2).max(128);
    files.saturating_sub(reserve).max(16)
}

/// A connection waits for a request ...
const WAITING: u8 = 0;
/// ... is answering one ...
const IN_REQUEST: u8 = 1;
/// ... or is asked to close to make room for another (only while it waits: a request that
/// begins takes the connection back).
const SHED: u8 = 2;

/// Times as nanoseconds since the first one asked for, so that they fit in atomics.
fn nanos(t: Instant) -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    t.saturating_duration_since(epoch).as_nanos() as u64 + 1
}

/// The time [`nanos`] gave `nanos` for.
fn instant(nanos: u64) -> Instant {
    *EPOCH.get_or_init(Instant::now) + Duration::from_nanos(nanos.saturating_sub(1))
}

/// The epoch of [`nanos`].
static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// One open connection, shared by its I/O, its requests and the registry. Its state is
/// atomics, read on every read of its socket.
pub struct Conn {
    /// [`WAITING`], [`IN_REQUEST`] or [`SHED`].
    state: AtomicU8,
    /// When it last started waiting for a request (see [`nanos`]); 0: when it is next read.
    idle_since: AtomicU64,
    /// When the first byte of the request being read arrived; 0 for none yet.
    head_since: AtomicU64,
    /// Who to wake to close it.
    waker: Mutex<Option<Waker>>,
    /// Bytes read from the client so far.
    read: AtomicU64,
    /// Where the head of the request being read ended, in `read`'s count (0: not seen, or
    /// not known because it was read during the request before it).
    head_end: AtomicU64,
    /// The last bytes read while looking for the head's end (up to 3, and how many), so that
    /// an end split between two reads is found.
    head_tail: AtomicU32,
    registry: Arc<Connections>,
    id: u64,
}

impl Conn {
    /// A request has been read: the limits on waiting stop until its answer is sent. One
    /// asked to close meanwhile is kept (the registry looks again).
    pub fn begin_request(&self) {
        if self.state.swap(IN_REQUEST, Ordering::AcqRel) == SHED {
            self.registry.closed.notify_waiters();
        }
    }

    /// The answer has been sent: the connection waits for another request, timed from its
    /// next read (its reader's timer, armed meanwhile, sees to that: see [`Watched`]).
    pub fn end_request(&self) {
        self.head_since.store(0, Ordering::Relaxed);
        self.idle_since.store(0, Ordering::Relaxed);
        self.head_end.store(0, Ordering::Relaxed);
        self.head_tail.store(0, Ordering::Relaxed);
        self.state.store(WAITING, Ordering::Release);
        if self.registry.draining.load(Ordering::Acquire) {
            self.close_if_waiting();
        }
    }

    /// Asks the connection to close if it waits for a request (one in a request is left
    /// alone); whether it was asked.
    fn close_if_waiting(&self) -> bool {
        let asked = self
            .state
            .compare_exchange(WAITING, SHED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if asked {
            if let Some(w) = self.waker.lock().expect("waker lock").take() {
                w.wake();
            }
        }
        asked
    }

    /// Counts bytes read; while a request head is awaited, notes where it ends.
    fn note_read(&self, bytes: &[u8], waiting: bool) {
        let start = self.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if !waiting || bytes.is_empty() || self.head_end.load(Ordering::Relaxed) != 0 {
            return;
        }
        let [t0, t1, t2, kept] = self.head_tail.load(Ordering::Relaxed).to_le_bytes();
        let mut seam = [t0, t1, t2, 0, 0, 0];
        let kept = usize::from(kept);
        let take = bytes.len().min(3);
        seam[kept..kept + take].copy_from_slice(&bytes[..take]);
        let found = seam[..kept + take]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| start + (i + 4 - kept) as u64)
            .or_else(|| memchr::memmem::find(bytes, b"\r\n\r\n").map(|i| start + i as u64 + 4));
        match found {
            Some(end) => self.head_end.store(end, Ordering::Relaxed),
            None => {
                let mut joined = seam[..kept].to_vec();
                joined.extend_from_slice(&bytes[bytes.len().saturating_sub(3)..]);
                let last = &joined[joined.len().saturating_sub(3)..];
                let mut word = [0u8; 4];
                word[..last.len()].copy_from_slice(last);
                word[3] = last.len() as u8;
                self.head_tail
                    .store(u32::from_le_bytes(word), Ordering::Relaxed);
            }
        }
    }

    /// Whether bytes beyond the request head and a body of `body_len` bytes were read from
    /// the client by now, too few to be a request of their own (the shortest, `GET /
    /// HTTP/1.0` and an empty line, takes 18): they came with the body, from a client that
    /// sent more than its `Content-Length` said. Bytes enough for a request are taken for a
    /// pipelined one. Unknown (false) when the head's end was not seen.
    pub fn read_past(&self, body_len: u64) -> bool {
        const SHORTEST_REQUEST: u64 = 18;
        match self.head_end.load(Ordering::Relaxed) {
            0 => false,
            end => (1..SHORTEST_REQUEST).contains(
                &self
                    .read
                    .load(Ordering::Relaxed)
                    .saturating_sub(end + body_len),
            ),
        }
    }

    /// When it started waiting for a request, taking now if that was not yet noted.
    fn idle_since(&self, now: Instant) -> Instant {
        match self.idle_since.load(Ordering::Relaxed) {
            0 => {
                self.idle_since.store(nanos(now), Ordering::Relaxed);
                now
            }
            n => instant(n),
        }
    }

    /// The order in which connections waiting for a request give way: those trickling a
    /// head first, longest first, then those idle longest; `None` for one that does not wait,
    /// or whose whole head has arrived (its request is about to begin: a client that sent
    /// one must not be cut for a crowd that sent nothing).
    fn give_way_order(&self) -> Option<(bool, u64)> {
        if self.state.load(Ordering::Acquire) != WAITING
            || self.head_end.load(Ordering::Relaxed) != 0
        {
            return None;
        }
        match self.head_since.load(Ordering::Relaxed) {
            // One whose wait was not yet noted has only just begun it.
            0 => Some((
                true,
                match self.idle_since.load(Ordering::Relaxed) {
                    0 => u64::MAX,
                    n => n,
                },
            )),
            head => Some((false, head)),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.registry
            .open
            .lock()
            .expect("connections lock")
            .remove(&self.id);
        self.registry.closed.notify_waiters();
    }
}

/// Every open connection.
pub struct Connections {
    open: Mutex<HashMap<u64, std::sync::Weak<Conn>>>,
    next_id: AtomicU64,
    closed: tokio::sync::Notify,
    budget: usize,
    /// Set when the server stops: no connection waits for another request.
    draining: std::sync::atomic::AtomicBool,
}

impl Connections {
    /// An empty registry whose connections are bounded by `budget` besides the configured
    /// maximum (see [`socket_budget`]).
    pub fn new(budget: usize) -> Arc<Connections> {
        Arc::new(Connections {
            open: Mutex::default(),
            next_id: AtomicU64::new(0),
            closed: tokio::sync::Notify::new(),
            budget,
            draining: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Stops keeping connections open, for a server that stops: those waiting for a request
    /// close now, the others once their answer is sent. Waits until none is open or `limit`
    /// has passed; whether every one closed.
    pub async fn drain(&self, limit: Duration) -> bool {
        self.draining.store(true, Ordering::Release);
        let deadline = Instant::now() + limit;
        loop {
            let conns: Vec<Arc<Conn>> = {
                let open = self.open.lock().expect("connections lock");
                open.values().filter_map(std::sync::Weak::upgrade).collect()
            };
            if conns.is_empty() {
                return true;
            }
            for c in &conns {
                c.close_if_waiting();
            }
            drop(conns);
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many connections are open.
    pub fn count(&self) -> usize {
        self.open.lock().expect("connections lock").len()
    }

    /// Waits until one more connection may be accepted under `max`: at the limit, closes
    /// the connection that has waited longest for a request, or, when all are in requests,
    /// waits for one to close.
    pub async fn room(&self, max: usize) {
        let max = max.min(self.budget).max(1);
        loop {
            let closed = self.closed.notified();
            if !self.full(max) {
                return;
            }
            closed.await;
        }
    }

    /// Whether `max` are open; if so, one waiting for a request is asked to close: the one
    /// that has been sending a request head longest, else the one idle longest (a client
    /// keeping a connection open between requests gives way only to new clients, never to
    /// one that trickles a head).
    fn full(&self, max: usize) -> bool {
        let conns: Vec<Arc<Conn>> = {
            let open = self.open.lock().expect("connections lock");
            if open.len() < max {
                return false;
            }
            open.values().filter_map(std::sync::Weak::upgrade).collect()
        };
        // Chosen outside the registry's lock: dropping the last handle of a connection that
        // has just closed takes that lock.
        let mut waiting: Vec<_> = conns
            .iter()
            .filter_map(|c| c.give_way_order().map(|order| (order, c)))
            .collect();
        waiting.sort_unstable_by_key(|(order, _)| *order);
        for (_, victim) in waiting {
            // One that began a request since it was looked at is left alone.
            if victim.close_if_waiting() {
                break;
            }
        }
        true
    }

    /// Registers a connection just accepted.
    pub fn register(self: &Arc<Self>) -> Arc<Conn> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            state: AtomicU8::new(WAITING),
            idle_since: AtomicU64::new(nanos(Instant::now())),
            head_since: AtomicU64::new(0),
            waker: Mutex::default(),
            read: AtomicU64::new(0),
            head_end: AtomicU64::new(0),
            head_tail: AtomicU32::new(0),
            registry: self.clone(),
            id,
        });
        self.open
            .lock()
            .expect("connections lock")
            .insert(id, Arc::downgrade(&conn));
        conn
    }
}

/// A connection's byte stream, ended when the client keeps the server waiting too long for a
/// request (see the module documentation) or when the connection is shed.
pub struct Watched<I> {
    io: I,
    conn: Arc<Conn>,
    limits: ConnLimits,
    timer: Pin<Box<Sleep>>,
}

impl<I> Watched<I> {
    /// Watches `io`, the stream of `conn`.
    pub fn new(io: I, conn: Arc<Conn>, limits: ConnLimits) -> Watched<I> {
        Watched {
            io,
            conn,
            limits,
            timer: Box::pin(tokio::time::sleep(limits.idle)),
        }
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the client took too long to send {what}"),
    )
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let got = buf.filled().len() > before;
        let this = &mut *self;
        let conn = &this.conn;
        let state = conn.state.load(Ordering::Acquire);
        if got {
            conn.note_read(&buf.filled()[before..], state != IN_REQUEST);
        }
        if state == SHED {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for other clients",
            )));
        }
        // No clock runs while a request is answered.
        if state == IN_REQUEST {
            return match polled {
                Poll::Pending => this.wait(cx, None, ""),
                ready => ready,
            };
        }
        if got && conn.head_since.load(Ordering::Relaxed) == 0 {
            conn.head_since
                .store(nanos(Instant::now()), Ordering::Relaxed);
        }
        if polled.is_ready() {
            return polled;
        }
        {
            let mut waker = conn.waker.lock().expect("waker lock");
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
        }
        let (deadline, what) = match conn.head_since.load(Ordering::Relaxed) {
            0 => (
                conn.idle_since(Instant::now()) + this.limits.idle,
                "a request",
            ),
            head => (instant(head) + this.limits.header, "a request head"),
        };
        this.wait(cx, Some(deadline), what)
    }
}

impl<I> Watched<I> {
    /// Waits for `deadline`, if any. The timer is kept armed no later than the deadline that
    /// applies (and, during a request, at most an idle period ahead), and is only moved
    /// earlier: one that fires early makes the reader look again and re-arm it. So the
    /// wait for the next request is timed once an answer is sent without anyone waking the
    /// reader, and steady traffic moves no timer.
    fn wait(
        &mut self,
        cx: &mut Context<'_>,
        deadline: Option<Instant>,
        what: &str,
    ) -> Poll<io::Result<()>> {
        loop {
            // Armed in the future, no later than the deadline: nothing to read the clock for.
            if !self.timer.is_elapsed() {
                if let Some(d) = deadline.filter(|d| *d < self.timer.deadline()) {
                    self.timer.as_mut().reset(d);
                }
                if self.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            // It went off: the deadline passed, or it went off early and is armed again.
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Poll::Ready(Err(timed_out(what)));
            }
            self.timer
                .as_mut()
                .reset(deadline.unwrap_or(now + self.limits.idle));
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// A response body that tells its connection when it has been sent (or dropped unsent), so
/// that the wait for the next request starts then.
pub struct Answer<B> {
    inner: B,
    conn: Option<Arc<Conn>>,
}

impl<B> Answer<B> {
    /// `inner`, answering a request of `conn`.
    pub fn new(inner: B, conn: Arc<Conn>) -> Answer<B> {
        Answer {
            inner,
            conn: Some(conn),
        }
    }

    fn done(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.end_request();
        }
    }
}

impl<B> Drop for Answer<B> {
    fn drop(&mut self) {
        self.done();
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Answer<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            self.done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that fails when the client pauses longer than the body timeout between
/// bytes.
pub struct TimedBody {
    inner: hyper::body::Incoming,
    /// The connection it arrives on.
    conn: Arc<Conn>,
    pause: Duration,
    /// Set when the body is first waited for: the time a handler takes before reading it
    /// does not count, and a request whose body is never waited for makes no timer.
    timer: Option<Pin<Box<Sleep>>>,
}

/// What reading a request body failed with.
#[derive(Debug)]
pub enum BodyError {
    /// The connection failed or the body was malformed.
    Read(hyper::Error),
    /// The client paused longer than the body timeout.
    TimedOut,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Read(e) => write!(f, "{e}"),
            BodyError::TimedOut => f.write_str("the client paused too long while sending the body"),
        }
    }
}

impl std::error::Error for BodyError {}

impl TimedBody {
    /// `inner`, arriving on `conn`, allowed pauses of at most `pause`.
    pub fn new(inner: hyper::body::Incoming, pause: Duration, conn: Arc<Conn>) -> TimedBody {
        TimedBody {
            inner,
            conn,
            pause,
            timer: None,
        }
    }

    /// Whether the client sent more bytes with this body than its `Content-Length` said
    /// (`content_length`): they were read with it (as CouchDB reads an attachment, and
    /// refuses it), rather than taken for the start of another request. Ask once the body
    /// has ended.
    pub fn overran(&self, content_length: u64) -> bool {
        self.conn.read_past(content_length)
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(timer) = &mut this.timer {
                    timer.as_mut().reset(Instant::now() + this.pause);
                }
                Poll::Ready(frame.map(|f| f.map_err(BodyError::Read)))
            }
            Poll::Pending => {
                let pause = this.pause;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(BodyError::TimedOut))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(c: &Conn) -> u8 {
        c.state.load(Ordering::Acquire)
    }

    /// At the limit, one that trickles a head gives way first, then the one idle longest;
    /// one whose whole head has arrived (its request not yet begun) never does.
    #[test]
    fn a_client_whose_head_arrived_is_not_cut_for_idle_ones() {
        let registry = Connections::new(16);
        let (idle, whole, partial) = (
            registry.register(),
            registry.register(),
            registry.register(),
        );
        idle.idle_since
            .store(nanos(Instant::now()), Ordering::Relaxed);
        for (c, bytes) in [
            (&whole, &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]),
            (&partial, b"GET / HT"),
        ] {
            c.note_read(bytes, true);
            c.head_since.store(nanos(Instant::now()), Ordering::Relaxed);
        }
        assert!(registry.full(3));
        assert_eq!(
            (state(&partial), state(&whole), state(&idle)),
            (SHED, WAITING, WAITING)
        );
        assert!(registry.full(3));
        assert_eq!((state(&whole), state(&idle)), (WAITING, SHED));
        assert!(registry.full(3), "still at the limit, with none to ask");
        assert_eq!(state(&whole), WAITING);
    }
}
