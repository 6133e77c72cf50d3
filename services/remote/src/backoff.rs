//! Reconnecting with backoff. A gRPC channel whose service went away reconnects on its
//! next call; without a pause, every request of a busy gateway would dial a restarting
//! pod. [`Connector`] remembers its failures: after one, the next attempts within an
//! exponentially growing pause ([`pause`]: 50 ms doubling to 1 s, with jitter) fail at
//! once (the call gets UNAVAILABLE, the client 503 with Retry-After) instead of dialling,
//! and the first success resets it. So a service back from a restart is found again
//! within about a second, and a dead one costs about one connection attempt a second.
//! An attempt whose pause ends within [`PATIENCE`] waits for it instead: right after a
//! pod restarts, its first pauses are that short, and a call that comes a few
//! milliseconds too early should reach the new pod rather than fail.
//!
//! After a failure the connector also dials by itself, at the end of each pause, until
//! one attempt connects ([`Connector::accepting`] is false until then). A balancer sends
//! no call to a backend that is not accepting while another is, so no client's request
//! is spent finding out whether a pod is back.

use http::Uri;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The pause after the first failure.
pub const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);
/// How long an attempt waits for a pause to end rather than fail at once.
pub const PATIENCE: Duration = Duration::from_millis(250);

/// The pause after `failures` failed attempts in a row: [`FIRST_PAUSE`] doubling up to
/// [`MAX_PAUSE`], then ±20 % jitter so that many gateways do not dial in step.
pub fn pause(failures: u32) -> Duration {
    let doubled = FIRST_PAUSE.saturating_mul(1 << failures.saturating_sub(1).min(16));
    doubled.min(MAX_PAUSE).mul_f64(0.8 + fastrand::f64() * 0.4)
}

#[derive(Debug, Default)]
struct State {
    failures: u32,
    retry_at: Option<Instant>,
    /// Whether a task dials the backend until it accepts ([`Connector::probe`]).
    probing: bool,
}

/// Dials TCP for one backend, pausing after failures (see [the module](self)).
#[derive(Clone, Debug)]
pub struct Connector {
    state: Arc<Mutex<State>>,
    timeout: Duration,
}

impl Connector {
    /// A connector whose attempts give up after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            state: Arc::default(),
            timeout,
        }
    }

    /// Whether the last attempt to connect succeeded (or none was made): a balancer's
    /// check of whether calls may be sent this way.
    pub fn accepting(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).failures == 0
    }

    /// Counts a failure; answers whether a probe should start (none runs yet).
    fn failed(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.failures = state.failures.saturating_add(1);
        state.retry_at = Some(Instant::now() + pause(state.failures));
        !std::mem::replace(&mut state.probing, true)
    }

    fn succeeded(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.failures = 0;
        state.retry_at = None;
    }

    /// Dials `host:port` at the end of every pause until an attempt (this task's or a
    /// call's) connects, or until nothing uses this connector any more.
    fn probe(&self, host: String, port: u16) {
        let state = Arc::downgrade(&self.state);
        let timeout = self.timeout;
        tokio::spawn(async move {
            loop {
                match probe_wait(&state) {
                    None => return,
                    Some(wait) if !wait.is_zero() => {
                        tokio::time::sleep(wait).await;
                        continue; // a call may have connected, or failed again, meanwhile
                    }
                    Some(_) => {}
                }
                let attempt = tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await;
                let Some(state) = state.upgrade() else { return };
                let connector = Connector { state, timeout };
                if matches!(attempt, Ok(Ok(_))) {
                    connector.succeeded();
                } else {
                    connector.failed();
                }
            }
        });
    }

    /// Why an attempt now would be refused, if it would.
    fn paused(&self) -> Option<(u32, Duration)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let left = state.retry_at?.checked_duration_since(Instant::now())?;
        Some((state.failures, left))
    }

    async fn connect(self, uri: Uri) -> io::Result<TokioIo<TcpStream>> {
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned();
        let port = uri.port_u16().unwrap_or(80);
        if let Some((_, left)) = self.paused().filter(|(_, left)| *left <= PATIENCE) {
            tokio::time::sleep(left).await;
        }
        if let Some((failures, left)) = self.paused() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "{host}:{port} refused {failures} connection attempt(s) in a row; the next one in {} ms",
                    left.as_millis()
                ),
            ));
        }
        let attempt = async {
            let stream = TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok::<_, io::Error>(stream)
        };
        let outcome = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{host}:{port} did not accept a connection within {:?}",
                    self.timeout
                ),
            )),
        };
        match outcome {
            Ok(stream) => {
                self.succeeded();
                Ok(TokioIo::new(stream))
            }
            Err(e) => {
                if self.failed() {
                    self.probe(host, port);
                }
                Err(e)
            }
        }
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}

/// How long a probe waits before its next attempt; `None` ends it: an attempt connected
/// (the probe is then over), or nothing uses the connector any more.
fn probe_wait(state: &std::sync::Weak<Mutex<State>>) -> Option<Duration> {
    let state = state.upgrade()?;
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    if state.failures == 0 {
        state.probing = false;
        return None;
    }
    Some(
        state
            .retry_at
            .and_then(|at| at.checked_duration_since(Instant::now()))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_service::Service;

    #[test]
    fn pauses_double_up_to_a_second() {
        for (failures, nominal) in [(1, 50), (2, 100), (3, 200), (5, 800), (6, 1000), (40, 1000)] {
            let pause = pause(failures).as_millis() as f64;
            let nominal = nominal as f64;
            assert!(
                (nominal * 0.8..=nominal * 1.2).contains(&pause),
                "{failures}: {pause}"
            );
        }
    }

    #[tokio::test]
    async fn after_a_failure_attempts_wait_then_a_success_resets() {
        // A port nothing listens on: bind one and close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri: Uri = format!("http://127.0.0.1:{port}").parse().unwrap();
        let mut connector = Connector::new(Duration::from_secs(2));
        let refused = connector.call(uri.clone()).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        // A long pause (many failures in a row) refuses at once.
        connector.state.lock().unwrap().retry_at = Some(Instant::now() + MAX_PAUSE);
        let paused = connector.call(uri.clone()).await.unwrap_err();
        assert!(paused.to_string().contains("the next one in"), "{paused}");

        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        connector.state.lock().unwrap().retry_at = Some(Instant::now()); // the pause is over
        connector
            .call(uri.clone())
            .await
            .expect("connects once the pause is over");
        drop(listener);
        let failures = connector.state.lock().unwrap().failures;
        assert_eq!(failures, 0, "a success resets the count");
    }

    /// A service restarted: the attempt that failed while it was down paused the next
    /// ones for 50 ms, and a call that comes during that pause, once the service is back,
    /// waits the pause out and reaches it instead of failing.
    #[tokio::test]
    async fn a_short_pause_is_waited_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let mut connector = Connector::new(Duration::from_secs(2));
        connector.failed();
        let left = connector.paused().expect("paused").1;
        assert!(left <= PATIENCE, "{left:?}");
        connector
            .call(uri)
            .await
            .expect("the attempt waits for the pause to end, then connects");
    }
}
