//! What a server says about a call before its answer reaches the caller before the answer, in
//! the order the server said it. rmcp hands each notification to a task of its own, so two
//! progress notifications could pass each other, and the answer could pass both; this
//! transport layer takes a call's progress and log messages off the wire as they are read,
//! before the next message is: progress goes to its call's route (the call drains it before
//! passing its answer on) and a log message to its client, both in order.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::model::{ServerJsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::progress::ProgressRoutes;
use super::relay::Relays;

/// The longest one log message may hold up reading the server when its client is slow to
/// take it; past it the message is dropped (log messages are advisory).
const LOG_WAIT: Duration = Duration::from_secs(1);

/// A log message on its way to a client.
type Forwarding = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where one connection's progress and log messages go.
#[derive(Clone)]
pub(super) struct Handover {
    pub server: String,
    pub progress: ProgressRoutes,
    pub relays: Relays,
}

impl Handover {
    /// `transport`, handing this connection's progress and log messages over as it reads them.
    pub(super) fn wrap<T>(&self, transport: T) -> InOrder<T> {
        InOrder {
            inner: transport,
            to: self.clone(),
            forwarding: None,
        }
    }
}

/// `inner`, with a call's progress and log messages handed over as they are read.
pub(super) struct InOrder<T> {
    inner: T,
    to: Handover,
    /// The log message being passed on; kept here so that a `receive` dropped midway (rmcp
    /// polls it in a `select!`) finishes it next time.
    forwarding: Option<Forwarding>,
}

impl<T> InOrder<T> {
    /// A log message as its client gets it (`None`: no client wants it).
    #[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
    fn log(&self, mut params: rmcp::model::LoggingMessageNotificationParam) -> Option<Forwarding> {
        let (peer, level) = self.to.relays.log_to()?;
        let wanted = *level.lock();
        if wanted.is_none_or(|wanted| (params.level as u8) < (wanted as u8)) {
            return None;
        }
        params.logger = Some(match params.logger.take() {
            Some(logger) => format!("{}/{logger}", self.to.server),
            None => self.to.server.clone(),
        });
        Some(Box::pin(async move {
            let _ = tokio::time::timeout(LOG_WAIT, peer.notify_logging_message(params)).await;
        }))
    }
}

impl<T> Transport<RoleClient> for InOrder<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(forwarding) = &mut self.forwarding {
                forwarding.await;
                self.forwarding = None;
            }
            let message = self.inner.receive().await?;
            let ServerJsonRpcMessage::Notification(notification) = &message else {
                return Some(message);
            };
            match &notification.notification {
                // Still passed on: rmcp resets a request's timeout on its progress.
                ServerNotification::ProgressNotification(progress) => {
                    self.to.progress.deliver(progress.params.clone());
                    return Some(message);
                }
                ServerNotification::LoggingMessageNotification(log) => {
                    self.forwarding = self.log(log.params.clone());
                }
                _ => return Some(message),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use rmcp::model::{
        CallToolResult, NumberOrString, ProgressNotification, ProgressNotificationParam,
        ProgressToken, RequestId, ServerResult,
    };

    use super::*;
    use crate::upstream::relay::Origin;

    /// A transport that reads the given messages, then nothing.
    struct Replay(VecDeque<ServerJsonRpcMessage>);

    impl Transport<RoleClient> for Replay {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.0.pop_front()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn progress_reaches_its_call_in_order_before_the_answer_is_read() {
        let token = ProgressToken(NumberOrString::Number(7));
        let progress = |n: f64| {
            let params = ProgressNotificationParam::new(token.clone(), n);
            ServerJsonRpcMessage::notification(ProgressNotification::new(params).into())
        };
        let answer = ServerJsonRpcMessage::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![])),
            RequestId::Number(1),
        );
        let routes = ProgressRoutes::default();
        let (to, mut received) = tokio::sync::mpsc::channel(8);
        let _route = routes.register(token.clone(), to);
        let handover = Handover {
            server: "s".into(),
            progress: routes,
            relays: Relays::new(
                Origin::Detached,
                crate::upstream::roots::Roots::new(None, true),
            ),
        };
        let mut wire = handover.wrap(Replay(
            [progress(0.0), progress(50.0), progress(100.0), answer].into(),
        ));
        for _ in 0..3 {
            let read = wire.receive().await.unwrap();
            assert!(
                matches!(read, ServerJsonRpcMessage::Notification(_)),
                "{read:?}"
            );
        }
        let seen: Vec<f64> = std::iter::from_fn(|| received.try_recv().ok())
            .map(|p| p.progress)
            .collect();
        assert_eq!(
            seen,
            [0.0, 50.0, 100.0],
            "all of them, in order, before the answer is read"
        );
        assert!(matches!(
            wire.receive().await,
            Some(ServerJsonRpcMessage::Response(_))
        ));
    }
}
