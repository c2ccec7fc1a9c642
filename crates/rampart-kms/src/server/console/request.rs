//! What a console route is given and answers: the parsed request, the
//! signed-in admin, the audit record of the request, and the answer.

use hyper::header::HeaderMap;
use hyper::Method;

use super::sessions::{valid_host, Session};
use crate::model::ClientInfo;

/// What a console route answers.
pub(super) enum Out {
    Page {
        status: u16,
        title: String,
        body: String,
    },
    /// 303 See Other.
    Redirect(String),
    Download {
        filename: String,
        content_type: &'static str,
        body: Vec<u8>,
    },
    Asset {
        content_type: &'static str,
        body: &'static str,
    },
}

/// A console request: its parts and form body.
pub(super) struct Req {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub form: std::collections::BTreeMap<String, String>,
}

impl Req {
    /// A form field, empty when absent.
    pub fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }

    pub(super) fn host(&self) -> Option<String> {
        valid_host(self.headers.get(hyper::header::HOST))
    }
}

/// The signed-in admin of a request.
pub(super) struct Auth {
    pub session: Session,
    pub admin: ClientInfo,
}

/// What a request did, for its audit entry.
#[derive(Default)]
pub(super) struct Audit {
    pub op: &'static str,
    pub key: Option<String>,
    pub version: Option<u32>,
    pub note: Option<String>,
}
