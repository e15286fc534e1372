//! The OTLP exporter's HTTP client: the reqwest client already in the build, each export run
//! as a task of the serving runtime. The SDK's batch processor exports from a thread of its
//! own, outside any runtime, where reqwest cannot run; it waits for the task instead.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// Sends each export with `client` on `runtime`.
#[derive(Debug)]
pub(super) struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OnRuntime {
    pub(super) fn new(runtime: tokio::runtime::Handle) -> Self {
        // reqwest is built without a TLS provider of its own (an https collector needs one).
        crate::auth::ensure_tls();
        Self {
            client: reqwest::Client::new(),
            runtime,
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        // opentelemetry-http's own impl for reqwest bounds the answer it reads.
        let sent = self
            .runtime
            .spawn(async move { client.send_bytes(request).await });
        sent.await?
    }
}
