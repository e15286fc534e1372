//! Connections of `serve --http`: at most a fixed number open at once (one more gets a 503 and
//! is closed), each HTTP/1.1 with a header-read timeout, which also closes kept-alive
//! connections left idle, and a deadline for a request's body; so half-sent requests
//! (slowloris), with or without a token, cannot hold file descriptors.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Time a client has to send a request's headers; also how long a kept-alive connection may
/// wait idle for its next request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time from a request's headers to its response's: reading the body, starting the answer
/// (a tool call's result streams after that, as long as it takes).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection over the limit may take to receive its 503.
const REFUSE_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause after an accept error that is not the peer's (out of file descriptors, ...).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts connections until `shutdown`, at most `max` served at once, then waits for the
/// open ones to close (each is asked to finish its current response).
pub(in crate::server) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    max: usize,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(max));
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    if !is_peer_error(&e) {
                        tracing::warn!("accepting a connection failed: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let (router, shutdown) = (router.clone(), shutdown.clone());
                tokio::spawn(async move {
                    serve_connection(stream, router, shutdown).await;
                    drop(slot);
                });
            }
            Err(_) => {
                tracing::debug!("{max} connections open; refusing one more");
                tokio::spawn(refuse(stream));
            }
        }
    }
    let _ = slots
        .acquire_many(u32::try_from(max).unwrap_or(u32::MAX))
        .await;
}

/// Errors of one connection attempt, after which accepting goes on at once.
fn is_peer_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Serves one connection until it closes, times out, or `shutdown` asks it to finish.
pub(in crate::server) async fn serve_connection<I>(
    io: I,
    router: axum::Router,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(router));
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection closed: {e}");
    }
}

/// Tells a connection over the limit to come back later, and closes it.
async fn refuse<I: AsyncWrite + Unpin>(mut io: I) {
    const BODY: &str = "too many connections; try again in a moment\n";
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = tokio::time::timeout(REFUSE_TIMEOUT, async {
        io.write_all(reply.as_bytes()).await?;
        io.shutdown().await
    })
    .await;
}

/// Answers 408 when a request's response has not started within [`REQUEST_TIMEOUT`] (its
/// body arrives too slowly).
pub(in crate::server) async fn within_request_timeout(request: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "the request did not arrive in time\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use tokio::io::{AsyncReadExt, DuplexStream};

    fn router() -> axum::Router {
        axum::Router::new()
            .route("/echo", post(|body: String| async move { body }))
            .layer(axum::middleware::from_fn(within_request_timeout))
    }

    /// A client end and the served connection's future, on an in-memory pipe.
    fn connect() -> (DuplexStream, tokio::task::JoinHandle<()>) {
        let (client, server) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve_connection(server, router(), CancellationToken::new()));
        (client, served)
    }

    async fn read_some(client: &mut DuplexStream) -> String {
        let mut buf = vec![0; 4096];
        let n = client.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn half_sent_headers_are_cut_off_at_the_header_timeout() {
        let (mut client, mut served) = connect();
        client
            .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let early = tokio::time::timeout(HEADER_TIMEOUT - Duration::from_secs(1), &mut served);
        assert!(early.await.is_err(), "still waiting for the headers");
        tokio::time::timeout(Duration::from_secs(2), served)
            .await
            .expect("closed at the header timeout")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_kept_alive_connection_is_closed() {
        let (mut client, mut served) = connect();
        client
            .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            .await
            .unwrap();
        let reply = read_some(&mut client).await;
        assert!(
            reply.starts_with("HTTP/1.1 200") && reply.ends_with("hi"),
            "{reply}"
        );
        let early = tokio::time::timeout(HEADER_TIMEOUT - Duration::from_secs(1), &mut served);
        assert!(early.await.is_err(), "kept alive for a while");
        tokio::time::timeout(Duration::from_secs(2), served)
            .await
            .expect("closed once idle for the header timeout")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_arrive_gets_408() {
        let (mut client, _served) = connect();
        client
            .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly this")
            .await
            .unwrap();
        let reply = read_some(&mut client).await;
        assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    }

    #[tokio::test]
    async fn connections_over_the_limit_get_503_and_are_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(serve(listener, router(), 2, shutdown.clone()));
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            // A completed request proves the connection holds a slot.
            stream
                .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
                .await
                .unwrap();
            let mut buf = [0; 256];
            let n = stream.read(&mut buf).await.unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            held.push(stream);
        }
        let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut reply = String::new();
        third.read_to_string(&mut reply).await.unwrap();
        assert!(
            reply.starts_with("HTTP/1.1 503") && reply.contains("Retry-After: 1"),
            "{reply}"
        );
        drop(held);
        shutdown.cancel();
        serving.await.unwrap();
    }
}
