//! meta-server's own lists of the upstreams' prompts, resources and resource templates, in
//! pages: a setup of tens of thousands of prompts is answered in pages of bounded size, each
//! naming the next with an opaque cursor (the offset of its first item), as MCP's pagination
//! has it. Real setups fit in the first page.

use rmcp::ErrorData as McpError;
use serde::Serialize;

/// Items in one page.
pub(super) const PAGE_ITEMS: usize = 1_000;
/// Bytes of one page's items as JSON, as clients get them (a page has at least one item,
/// whatever its size).
pub(super) const PAGE_BYTES: usize = 1 << 20;

/// The page of the `len` `items` that `cursor` names (the first without one), and the cursor
/// of the next page if there is one.
pub(super) fn page<'a, T: Serialize + Clone + 'a>(
    items: impl Iterator<Item = &'a T>,
    len: usize,
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), McpError> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|start| *start <= len)
            .ok_or_else(|| {
                McpError::invalid_params(
                    "this cursor is not one meta-server gave for this list (or the list has shrunk since); list again without a cursor",
                    None,
                )
            })?,
    };
    let mut page = Vec::new();
    let mut bytes = 0;
    for item in items.skip(start).take(PAGE_ITEMS) {
        bytes += crate::verbatim::sent_len(item);
        if bytes > PAGE_BYTES && !page.is_empty() {
            break;
        }
        page.push(item.clone());
    }
    let end = start + page.len();
    Ok((page, (end < len).then(|| end.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(items: &[String]) -> (Vec<Vec<String>>, Vec<Option<String>>) {
        let (mut pages, mut cursors) = (Vec::new(), Vec::new());
        let mut cursor = None;
        loop {
            let (page, next) = page(items.iter(), items.len(), cursor.as_deref()).unwrap();
            pages.push(page);
            cursors.push(next.clone());
            match next {
                Some(next) => cursor = Some(next),
                None => return (pages, cursors),
            }
        }
    }

    #[test]
    fn a_short_list_is_one_page_without_a_cursor() {
        let items: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(all(&items), (vec![items.clone()], vec![None]));
        assert_eq!(all(&[]), (vec![vec![]], vec![None]));
    }

    #[test]
    fn a_long_list_comes_in_pages_of_bounded_count_and_size() {
        let items: Vec<String> = (0..2_500).map(|i| format!("item {i}")).collect();
        let (pages, _) = all(&items);
        let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1_000, 1_000, 500]);
        assert_eq!(pages.concat(), items, "every item once, in order");
        let big: Vec<String> = (0..9)
            .map(|i| format!("{i}{}", "x".repeat(300_000)))
            .collect();
        let (pages, _) = all(&big);
        let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 3, 3]);
        let huge = vec!["y".repeat(3 << 20), "z".into()];
        let (pages, _) = all(&huge);
        assert_eq!(
            pages.iter().map(Vec::len).collect::<Vec<_>>(),
            [1, 1],
            "one item over the size is a page"
        );
    }

    #[test]
    fn a_cursor_meta_server_did_not_give_is_refused() {
        let items: Vec<String> = (0..3).map(|i| i.to_string()).collect();
        for cursor in ["x", "-1", "4", ""] {
            let refused = page(items.iter(), 3, Some(cursor)).unwrap_err();
            assert!(
                refused.message.contains("list again without a cursor"),
                "{cursor}"
            );
        }
        assert_eq!(page(items.iter(), 3, Some("3")).unwrap(), (vec![], None));
    }
}
