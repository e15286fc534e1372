//! `serve --http` over raw sockets: bodies over the limit are refused before they are read,
//! with or without a token, and every path checks Host and Origin.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::{meta_server, write_config};

const TOKEN: &str = "s3cret-token";
/// rmcp's request body limit, which `serve --http` applies before reading.
const LIMIT: usize = 4 * 1024 * 1024;
/// Long enough for a slow machine; a server that reads the whole body first never answers
/// within it (its request deadline is 30 s).
const REPLY_WITHIN: Duration = Duration::from_secs(20);

/// A `serve --http` process on a free loopback port, with no servers configured.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(token: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), json!({}), json!({}));
        let mut cmd = meta_server(&[
            "--config",
            config.to_str().unwrap(),
            "--catalog-dir",
            dir.path().join("catalogs").to_str().unwrap(),
            "serve",
            "--http",
            "127.0.0.1:0",
        ]);
        cmd.env_remove("META_SERVER_TOKEN")
            .env_remove("META_SERVER_STORE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(token) = token {
            cmd.env("META_SERVER_TOKEN", token);
        }
        let mut child = cmd.spawn().expect("meta-server starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "meta-server exited before serving"
            );
            if let Some(url) = line
                .trim()
                .strip_prefix("meta-server: serving MCP at http://")
            {
                break url.trim_end_matches("/mcp").parse().unwrap();
            }
        };
        // Keeps the pipe drained so logging never blocks the server.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Self {
            child,
            addr,
            _dir: dir,
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(REPLY_WITHIN)).unwrap();
        stream
    }

    /// Sends `head` and then `body` from another thread (ignoring write errors: the server
    /// may close early), and returns what the server answers until it closes the connection,
    /// and whether it did close it.
    fn exchange(
        &self,
        head: String,
        body: impl IntoIterator<Item = Vec<u8>> + Send + 'static,
    ) -> (String, bool) {
        let mut stream = self.connect();
        let mut writer = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            writer.write_all(head.as_bytes())?;
            for part in body {
                writer.write_all(&part)?;
            }
            std::io::Result::Ok(())
        });
        let mut reply = Vec::new();
        let mut buf = [0; 4096];
        let closed = loop {
            match stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                // A reset after the reply is a close too (the rest of the body was unread).
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        (String::from_utf8_lossy(&reply).into_owned(), closed)
    }

    /// One GET with these extra header lines; the reply's status line and body.
    fn get(&self, path: &str, headers: &str) -> String {
        let head = format!("GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
        self.exchange(head, Vec::new()).0
    }

    fn host(&self) -> String {
        format!("Host: {}\r\n", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A POST of `length` declared bytes to /mcp, with `extra` header lines.
fn declared(server: &Server, length: usize, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\n{}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}Content-Length: {length}\r\n\r\n",
        server.host()
    )
}

/// `megabytes` MB of body, a MB at a time.
fn megabytes(megabytes: usize) -> impl Iterator<Item = Vec<u8>> + Send {
    (0..megabytes).map(|_| vec![b' '; 1 << 20])
}

fn status(reply: &str) -> &str {
    reply.get(..12).unwrap_or(reply)
}

#[test]
fn a_declared_body_over_the_limit_gets_413_before_it_is_sent() {
    let server = Server::start(None);
    // 200 MB declared, 1 MB sent: a server that read the whole body first would never answer.
    let (reply, closed) = server.exchange(declared(&server, 200_000_000, ""), megabytes(1));
    assert_eq!(status(&reply), "HTTP/1.1 413", "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );
    assert!(closed, "the connection is closed, not drained");
    // The server still answers.
    assert!(
        server
            .get("/healthz", &server.host())
            .starts_with("HTTP/1.1 200")
    );
}

#[test]
fn a_chunked_body_is_refused_at_the_first_chunk_past_the_limit() {
    let server = Server::start(None);
    let head = format!(
        "POST /mcp HTTP/1.1\r\n{}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
        server.host()
    );
    // 6 MB in 64 KB chunks, never terminated: the reply can only come from the limit.
    let chunks = (0..96).map(|_| {
        let mut chunk = format!("{:x}\r\n", 64 * 1024).into_bytes();
        chunk.extend(std::iter::repeat_n(b' ', 64 * 1024));
        chunk.extend_from_slice(b"\r\n");
        chunk
    });
    let (reply, closed) = server.exchange(head, chunks);
    assert_eq!(status(&reply), "HTTP/1.1 413", "{reply}");
    assert!(closed);
}

#[test]
fn a_body_within_the_limit_is_still_read() {
    let server = Server::start(None);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": " ".repeat(LIMIT - 200)})
        .to_string()
        .into_bytes();
    let head = declared(&server, body.len(), "Connection: close\r\n");
    let (reply, _) = server.exchange(head, [body]);
    // Not a 413: rmcp got the body (and refuses a ping outside a session on its own terms).
    assert!(reply.starts_with("HTTP/1.1 "), "{reply}");
    assert_ne!(status(&reply), "HTTP/1.1 413", "{reply}");
}

#[test]
fn with_a_token_no_body_is_read_before_it_is_checked() {
    let server = Server::start(Some(TOKEN));
    let (reply, closed) = server.exchange(declared(&server, 200_000_000, ""), megabytes(1));
    assert_eq!(status(&reply), "HTTP/1.1 401", "{reply}");
    assert!(closed, "the rest of the body is not drained");
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let (reply, closed) = server.exchange(declared(&server, 200_000_000, &auth), megabytes(1));
    assert_eq!(status(&reply), "HTTP/1.1 413", "{reply}");
    assert!(closed);
}

#[test]
fn healthz_and_metrics_refuse_foreign_hosts_and_origins() {
    let server = Server::start(None);
    let port = server.addr.port();
    for path in ["/healthz", "/metrics", "/mcp"] {
        for headers in [
            "Host: evil.example\r\n".to_owned(),
            format!("Host: evil.example:{port}\r\n"),
            format!("{}Origin: http://evil.example\r\n", server.host()),
            format!("{}Origin: null\r\n", server.host()),
        ] {
            let reply = server.get(path, &headers);
            assert_eq!(
                status(&reply),
                "HTTP/1.1 403",
                "{path} {headers:?}: {reply}"
            );
        }
    }
    for headers in [
        server.host(),
        format!("Host: localhost:{port}\r\n"),
        format!("{}Origin: http://localhost:{port}\r\n", server.host()),
    ] {
        let reply = server.get("/healthz", &headers);
        assert!(
            reply.starts_with("HTTP/1.1 200") && reply.ends_with("ok\n"),
            "{reply}"
        );
        let reply = server.get("/metrics", &headers);
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
}
