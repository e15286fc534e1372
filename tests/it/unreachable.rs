//! What `index` says of an HTTP upstream it cannot reach, for each kind of failure: each
//! message names the cause and the next step (snapshots, ports filtered).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::json;

use crate::support::{meta_server, write_config};

/// Answers each request by its path: `/forbidden` 403, `/broken` 500, `/page` a web page,
/// `/json` JSON that is not JSON-RPC, `/hang` never; anything else 404.
fn web_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    port
}

fn answer(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let _ = reader.take(length).read_to_end(&mut Vec::new());
    let (status, kind, body) = match path.as_str() {
        "/hang" => {
            std::thread::sleep(std::time::Duration::from_secs(30));
            return;
        }
        "/forbidden" => ("403 Forbidden", "text/plain", ""),
        "/broken" => ("500 Internal Server Error", "text/plain", ""),
        "/page" => ("200 OK", "text/html", "<html><body>Welcome</body></html>"),
        "/json" => ("200 OK", "application/json", r#"{"hello": "world"}"#),
        _ => ("404 Not Found", "text/plain", ""),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn each_kind_of_unreachable_server_is_named_with_what_to_do() {
    let web = web_server();
    let closed = closed_port();
    let at = |path: &str| format!("http://127.0.0.1:{web}{path}");
    let servers = json!({
        "refused": {"url": format!("http://127.0.0.1:{closed}/mcp")},
        "unknown-host": {"url": "http://no-such-host.invalid/mcp"},
        "tls": {"url": format!("https://127.0.0.1:{web}/mcp")},
        "timeout": {"url": at("/hang"), "timeoutSecs": 1},
        "forbidden": {"url": at("/forbidden")},
        "not-found": {"url": at("/mcp")},
        "broken": {"url": at("/broken")},
        "web-page": {"url": at("/page")},
        "not-json-rpc": {"url": at("/json")},
        "sse-refused": {"type": "sse", "url": format!("http://127.0.0.1:{closed}/sse")},
        "sse-not-found": {"type": "sse", "url": at("/sse")},
        "sse-web-page": {"type": "sse", "url": at("/page")},
    });
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        servers,
        json!({"catalogDir": dir.path().join("cat")}),
    );
    let out = meta_server(&["--config", config.to_str().unwrap(), "index"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let results: Vec<String> = text
        .lines()
        .filter_map(|line| line.split_once("  server \""))
        .map(|(_, message)| format!("server \"{message}"))
        .collect();
    assert_eq!(results.len(), 12, "{text}");
    let report = results
        .join("\n")
        .replace(&format!("127.0.0.1:{web}"), "127.0.0.1:WEB")
        .replace(&format!("127.0.0.1:{closed}"), "127.0.0.1:CLOSED");
    // rustls's words for what it read from a plain HTTP port are its own.
    let report = match report.split_once("127.0.0.1:WEB failed (") {
        Some((before, after)) => {
            let rest = after.split_once(')').map_or("", |(_, rest)| rest);
            format!("{before}127.0.0.1:WEB failed (TLS DETAIL){rest}")
        }
        None => report,
    };
    insta::assert_snapshot!(report);
}
