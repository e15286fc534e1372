//! Every listing of an upstream (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`), followed page by page within the server's [`ListBounds`]:
//! pages, bytes of all pages together (as sent), and no cursor given twice. A server that always
//! returns a `nextCursor` is stopped there with an [`Overrun`], instead of being listed until
//! memory runs out; its other requests, and other servers, are not touched.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use rmcp::model::{
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams,
};
use rmcp::service::ServiceError;
use serde::Serialize;

use super::{Connection, Manager, Slot, UpstreamError};
use crate::config::ListBounds;

/// Every item of a listing, and the freshness the server gave it.
pub struct Listed<T> {
    pub items: Vec<T>,
    /// Milliseconds until the earliest page expires (SEP-2549), or `None` if any page
    /// omitted `ttlMs`.
    pub ttl_ms: Option<u64>,
}

/// Why a listing was given up before its last page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Overrun {
    #[error(
        "went on past {max} pages (maxListPages), so meta-server stopped listing it; if the server really lists that much, raise maxListPages for it in the config, else it is broken or hostile"
    )]
    Pages { max: u64 },
    #[error(
        "went past {} MiB (maxListMb) after {pages} pages, so meta-server stopped listing it; if the server really lists that much, raise maxListMb for it in the config, else it is broken or hostile", max >> 20
    )]
    Bytes { max: usize, pages: u64 },
    #[error(
        "gave on page {page} a cursor it had given before, so the listing would never end; the server is broken (its authors should hear of it)"
    )]
    Cycle { page: u64 },
}

/// One page of a listing, as rmcp reads it.
pub(super) trait Page: Serialize {
    type Item;
    /// The items, the cursor of the next page and the page's `ttlMs`.
    fn split(self) -> (Vec<Self::Item>, Option<String>, Option<u64>);
}

macro_rules! page {
    ($page:ty, $item:ty, $items:ident) => {
        impl Page for $page {
            type Item = $item;
            fn split(self) -> (Vec<$item>, Option<String>, Option<u64>) {
                (self.$items, self.next_cursor, self.ttl_ms)
            }
        }
    };
}

page!(ListToolsResult, rmcp::model::Tool, tools);
page!(ListPromptsResult, rmcp::model::Prompt, prompts);
page!(ListResourcesResult, rmcp::model::Resource, resources);
page!(
    ListResourceTemplatesResult,
    rmcp::model::ResourceTemplate,
    resource_templates
);

impl Manager {
    /// `what` of `slot`'s server on `conn`, every page, within its listing bounds and its
    /// call timeout.
    pub(super) async fn list_pages<P, F>(
        &self,
        slot: &Slot,
        conn: &Arc<Connection>,
        what: &str,
        list: impl FnMut(Option<PaginatedRequestParams>) -> F,
    ) -> Result<Listed<P::Item>, UpstreamError>
    where
        P: Page,
        F: Future<Output = Result<P, ServiceError>>,
    {
        let listed = self
            .bounded(slot, conn, what, all(slot.config.lists, list))
            .await?;
        listed.map_err(|overrun| overrun.of(&slot.config.name, what))
    }
}

impl Overrun {
    /// The error of `server`'s listing `what`.
    pub(super) fn of(self, server: &str, what: &str) -> UpstreamError {
        UpstreamError::Overrun {
            server: server.to_owned(),
            what: what.to_owned(),
            overrun: self,
        }
    }
}

/// Asks `list` for the first page, then for each `nextCursor`, until a page has none or the
/// listing overruns `bounds`. The outer error is the server's (or the transport's).
pub(super) async fn all<P, F>(
    bounds: ListBounds,
    mut list: impl FnMut(Option<PaginatedRequestParams>) -> F,
) -> Result<Result<Listed<P::Item>, Overrun>, ServiceError>
where
    P: Page,
    F: Future<Output = Result<P, ServiceError>>,
{
    let mut items = Vec::new();
    let mut ttl_ms = Some(u64::MAX);
    let mut bytes = 0usize;
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    for page in 1.. {
        if page > bounds.max_pages {
            return Ok(Err(Overrun::Pages {
                max: bounds.max_pages,
            }));
        }
        let params = cursor.take().map(|cursor| {
            let mut params = PaginatedRequestParams::default();
            params.cursor = Some(cursor);
            params
        });
        let answer = list(params).await?;
        bytes = bytes.saturating_add(crate::verbatim::sent_len(&answer));
        if bytes > bounds.max_bytes {
            return Ok(Err(Overrun::Bytes {
                max: bounds.max_bytes,
                pages: page,
            }));
        }
        let (page_items, next, ttl) = answer.split();
        items.extend(page_items);
        ttl_ms = ttl_ms.zip(ttl).map(|(a, b)| a.min(b));
        match next {
            None => break,
            // Kept to tell a cycle; their bytes were counted with their pages.
            Some(next) if !seen.insert(next.clone()) => {
                return Ok(Err(Overrun::Cycle { page }));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Ok(Ok(Listed { items, ttl_ms }))
}

#[cfg(test)]
mod tests {
    use rmcp::model::Prompt;

    use super::*;

    const BOUNDS: ListBounds = ListBounds {
        max_pages: 10,
        max_bytes: 4_000,
    };

    /// A listing whose page `n` (from 0) is `pages(n)`: its prompts and next cursor.
    async fn list(
        bounds: ListBounds,
        pages: impl Fn(usize) -> (usize, Option<String>),
    ) -> (Result<Listed<Prompt>, Overrun>, usize) {
        let asked = std::cell::Cell::new(0);
        let listed = all(bounds, |params: Option<PaginatedRequestParams>| {
            let n = asked.get();
            asked.set(n + 1);
            assert_eq!(
                params.is_none(),
                n == 0,
                "only the first page has no cursor"
            );
            let (count, next) = pages(n);
            let prompts =
                (0..count).map(|i| Prompt::new(format!("p{n}-{i}"), None::<String>, None));
            let mut page = ListPromptsResult::with_all_items(prompts.collect());
            page.next_cursor = next;
            std::future::ready(Ok(page))
        })
        .await
        .expect("no server error");
        (listed, asked.get())
    }

    #[tokio::test]
    async fn pages_are_followed_to_the_last_one() {
        let (listed, asked) = list(BOUNDS, |n| (3, (n < 2).then(|| format!("c{n}")))).await;
        let listed = listed.unwrap();
        assert_eq!((listed.items.len(), asked), (9, 3));
        assert_eq!(listed.items[8].name, "p2-2");
    }

    #[tokio::test]
    async fn a_cursor_without_end_stops_at_the_page_bound() {
        let (listed, asked) = list(BOUNDS, |n| (0, Some(format!("c{n}")))).await;
        assert_eq!(listed.err(), Some(Overrun::Pages { max: 10 }));
        assert_eq!(asked, 10, "no page past the bound is asked for");
    }

    #[tokio::test]
    async fn pages_past_the_byte_bound_stop_the_listing() {
        let (listed, asked) = list(BOUNDS, |n| (50, Some(format!("c{n}")))).await;
        let Err(Overrun::Bytes { max, pages }) = listed else {
            panic!("not stopped by bytes")
        };
        assert_eq!((max, pages as usize), (4_000, asked));
        assert!(asked < 10, "{asked}");
    }

    #[tokio::test]
    async fn a_repeated_or_unchanging_cursor_is_a_cycle() {
        let (listed, asked) = list(BOUNDS, |_| (1, Some("same".into()))).await;
        assert_eq!((listed.err(), asked), (Some(Overrun::Cycle { page: 2 }), 2));
        let (listed, _) = list(BOUNDS, |n| (1, Some(format!("c{}", n % 3)))).await;
        assert_eq!(listed.err(), Some(Overrun::Cycle { page: 4 }));
    }

    #[tokio::test]
    async fn the_earliest_ttl_of_the_pages_is_kept() {
        let ttl = |n: usize| Some([500, 200, 900][n]);
        let listed = all(
            ListBounds::default(),
            |params: Option<PaginatedRequestParams>| {
                let n = params
                    .and_then(|p| p.cursor)
                    .map_or(0, |c| c.parse().unwrap());
                let mut page = ListPromptsResult::with_all_items(Vec::new());
                page.next_cursor = (n < 2).then(|| (n + 1).to_string());
                page.ttl_ms = ttl(n);
                std::future::ready(Ok(page))
            },
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(listed.ttl_ms, Some(200));
    }

    #[test]
    fn the_message_names_the_bound_and_what_to_do() {
        let said = Overrun::Bytes {
            max: 32 << 20,
            pages: 7,
        }
        .to_string();
        assert!(
            said.contains("past 32 MiB (maxListMb) after 7 pages")
                && said.contains("raise maxListMb"),
            "{said}"
        );
    }
}
