//! Resuming a broken event stream of a 2025-11-25 session (`GET` with `Last-Event-ID`): rmcp's
//! session keeps the last events of each stream (16, its channel capacity) and those of a
//! finished stream for a minute, within the session's idle time, and sends them again on the
//! new stream before what follows. Its replay starts at the event the client names, which the
//! client already has (rmcp 3.11, `CachedTx::sync`): the header is moved one event on, so the
//! client gets exactly what it missed.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderValue;

const LAST_EVENT_ID: &str = "last-event-id";

/// Passes `request` on with its `Last-Event-ID` (rmcp's `<index>` or `<index>/<stream>`) one
/// event later; an id of another form is left as it is.
pub(super) async fn after_last_event(mut request: Request, next: Next) -> Response {
    let next_id = (request.headers().get(LAST_EVENT_ID))
        .and_then(|id| id.to_str().ok())
        .and_then(following);
    if let Some(id) = next_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        request.headers_mut().insert(LAST_EVENT_ID, id);
    }
    next.run(request).await
}

/// The id of the event after `id` on the same stream.
fn following(id: &str) -> Option<String> {
    let (index, stream) = match id.split_once('/') {
        Some((index, stream)) => (index, Some(stream)),
        None => (id, None),
    };
    let index: usize = index.parse().ok()?;
    let next = index.checked_add(1)?;
    Some(match stream {
        Some(stream) if stream.parse::<u64>().is_ok() => format!("{next}/{stream}"),
        Some(_) => return None,
        None => next.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::following;

    #[test]
    fn the_next_event_of_the_same_stream() {
        assert_eq!(following("1/0").as_deref(), Some("2/0"));
        assert_eq!(following("0/17").as_deref(), Some("1/17"));
        assert_eq!(
            following("4").as_deref(),
            Some("5"),
            "the session's own stream"
        );
        for other in ["", "x/0", "1/x", "abc", "-1", &format!("{}/0", usize::MAX)] {
            assert_eq!(following(other), None, "{other}");
        }
    }
}
