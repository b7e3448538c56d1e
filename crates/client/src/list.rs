//! LIST that no single object can fail: every caller outside the watch lists through here.
//!
//! Why: `Api::list` and `Api::list_metadata` decode a page in one serde pass, so one pod whose
//! `deletionTimestamp` (or any field) no client can decode fails the whole page, and with it a
//! start-up sweep, a reaper pass or a reattach lookup, on every retry, until someone deletes
//! the pod. Here a page is fetched as text and each item decoded on its own (the watch's
//! [`decode_page`](crate::watch)): an item that does not decode is logged at warn by
//! namespace/name when those are readable (with the field that failed, never its value),
//! counted in [`Page::skipped`] and left out; the rest are returned. A page that is not a list
//! at all still fails. The text is never logged (kube's `Client::request` logs a whole answer
//! it cannot decode: every pod's spec, env values included).
//!
//! [`Pages`] walks a LIST page by page with `continue`, each page retried per a
//! [`RetryPolicy`]; [`Pages::all`] collects every page.

use std::marker::PhantomData;

use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use serde::de::DeserializeOwned;

use crate::retry::{RetryPolicy, retry};
use crate::watch::{Skipped, decode_list_page};

/// One LIST page: the items that decoded, and what was skipped.
#[derive(Debug)]
pub struct Page<T> {
    /// The items that decoded, in the server's order.
    pub items: Vec<T>,
    /// The items that did not decode, each already logged.
    pub skipped: Vec<Skipped>,
    /// The token of the next page, if there is one (an empty token is none).
    pub continue_token: Option<String>,
    /// The list's resourceVersion, if it gave one.
    pub resource_version: Option<String>,
}

/// Every page of a LIST, collected ([`Pages::all`]).
#[derive(Debug)]
pub struct Listed<T> {
    /// The items that decoded, page after page.
    pub items: Vec<T>,
    /// The items that did not decode, each already logged.
    pub skipped: Vec<Skipped>,
}

/// Whether a LIST asks for whole objects or only their metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Objects,
    Metadata,
}

/// A LIST walked page by page, following `continue` until the last page.
///
/// `T` is what each item decodes as: the resource itself ([`Pages::objects`]) or its
/// [`PartialObjectMeta`] ([`Pages::metadata`]).
pub struct Pages<T> {
    client: kube::Client,
    url: String,
    params: ListParams,
    shape: Shape,
    /// `Some(None)`: the first page is next; `Some(Some(token))`: the page after `token`;
    /// `None`: the last page was returned.
    next: Option<Option<String>>,
    _items: PhantomData<fn() -> T>,
}

impl<K: kube::Resource + Clone> Pages<K> {
    /// Lists `api`'s objects per `params` (its `continue` is managed here: leave it unset).
    pub fn objects(api: &kube::Api<K>, params: ListParams) -> Self {
        Pages::new(api, params, Shape::Objects)
    }
}

impl<K: kube::Resource + Clone> Pages<PartialObjectMeta<K>> {
    /// Lists only the metadata of `api`'s objects per `params` (as `Api::list_metadata`).
    pub fn metadata(api: &kube::Api<K>, params: ListParams) -> Self {
        Pages::new(api, params, Shape::Metadata)
    }
}

impl<T> std::fmt::Debug for Pages<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pages")
            .field("url", &self.url)
            .field("shape", &self.shape)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl<T> Pages<T> {
    fn new<K: kube::Resource + Clone>(
        api: &kube::Api<K>,
        params: ListParams,
        shape: Shape,
    ) -> Self {
        Pages {
            client: api.clone().into_client(),
            url: api.resource_url().to_owned(),
            params,
            shape,
            next: Some(None),
            _items: PhantomData,
        }
    }
}

impl<T: DeserializeOwned> Pages<T> {
    /// The next page, retried per `policy` (`what` names the call in retry logs); `None` once
    /// the last page was returned. After an error the same page is asked for again.
    pub async fn next(
        &mut self,
        policy: &RetryPolicy,
        what: &str,
    ) -> Option<Result<Page<T>, kube::Error>> {
        let token = self.next.clone()?;
        let mut params = self.params.clone();
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = retry(policy, what, || self.fetch(&params)).await;
        if let Ok(page) = &page {
            self.next = page.continue_token.clone().map(Some);
        }
        Some(page)
    }

    /// Every remaining page, collected; the first page that fails (after `policy`'s retries)
    /// fails the whole.
    pub async fn all(mut self, policy: &RetryPolicy, what: &str) -> Result<Listed<T>, kube::Error> {
        let mut listed = Listed {
            items: Vec::new(),
            skipped: Vec::new(),
        };
        while let Some(page) = self.next(policy, what).await {
            let page = page?;
            listed.items.extend(page.items);
            listed.skipped.extend(page.skipped);
        }
        Ok(listed)
    }

    /// One request: the page as text, decoded item by item.
    async fn fetch(&self, params: &ListParams) -> Result<Page<T>, kube::Error> {
        let request = kube::core::Request::new(&self.url);
        let mut req = match self.shape {
            Shape::Objects => request.list(params),
            Shape::Metadata => request.list_metadata(params),
        }
        .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert(match self.shape {
            Shape::Objects => "list",
            Shape::Metadata => "list_metadata",
        });
        let text = self.client.request_text(req).await?;
        let decoded = decode_list_page::<T>(&text).map_err(kube::Error::SerdeError)?;
        let mut page = Page {
            items: Vec::with_capacity(decoded.items.len()),
            skipped: Vec::new(),
            continue_token: decoded.metadata.continue_.filter(|t| !t.is_empty()),
            resource_version: decoded.metadata.resource_version,
        };
        for item in decoded.items {
            match item {
                Ok(item) => page.items.push(item),
                Err(skipped) => {
                    tracing::warn!(
                        namespace = skipped.namespace.as_deref().unwrap_or_default(),
                        name = skipped.name.as_deref().unwrap_or_default(),
                        uid = skipped.uid.as_deref().unwrap_or_default(),
                        resource = %self.url,
                        "skipped a listed object that does not decode: {skipped}"
                    );
                    page.skipped.push(*skipped);
                }
            }
        }
        Ok(page)
    }
}
