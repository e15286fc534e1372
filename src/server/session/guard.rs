//! A transport wrapper that answers `server/discover` and unknown methods sent before
//! `initialize` with JSON-RPC -32601 at once (rmcp would answer -32022 or -32602), so probing
//! clients such as the Python SDK in `mode="auto"` fall back to `initialize` right away.

use rmcp::model::{ClientRequest, ErrorCode, ErrorData, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

pub struct PreInitGuard<T> {
    inner: T,
    initialized: bool,
}

impl<T: Transport<RoleServer>> PreInitGuard<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            initialized: false,
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for PreInitGuard<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.inner.receive().await?;
            if self.initialized {
                return Some(message);
            }
            match &message {
                JsonRpcMessage::Request(req) => match &req.request {
                    ClientRequest::InitializeRequest(_) => self.initialized = true,
                    request @ (ClientRequest::DiscoverRequest(_)
                    | ClientRequest::CustomRequest(_)) => {
                        let error = ErrorData::new(
                            ErrorCode::METHOD_NOT_FOUND,
                            format!("method not found: {}", request.method()),
                            None,
                        );
                        let reply =
                            TxJsonRpcMessage::<RoleServer>::error(error, Some(req.id.clone()));
                        if self.inner.send(reply).await.is_err() {
                            return None;
                        }
                        continue;
                    }
                    _ => {}
                },
                JsonRpcMessage::Notification(_) => {}
                _ => {}
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
