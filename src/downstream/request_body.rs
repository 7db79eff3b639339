//! The body of a downstream request as the router sees it: hyper's, or none at all (the
//! HTTP/1.1 watch path, [`super::h1`], reads only requests without a body).
//!
//! Owns nothing but the choice between the two; reading and dropping bodies is the router's.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;

/// A downstream request's body.
#[derive(Debug)]
pub enum ReqBody {
    /// The body hyper reads from the connection.
    Hyper(Incoming),
    /// No body: the request said it had none.
    Empty,
}

impl http_body::Body for ReqBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            ReqBody::Hyper(b) => Pin::new(b).poll_frame(cx),
            ReqBody::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReqBody::Hyper(b) => b.is_end_stream(),
            ReqBody::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReqBody::Hyper(b) => b.size_hint(),
            ReqBody::Empty => SizeHint::with_exact(0),
        }
    }
}
