//! A connection that fails once its client has taken no response byte for
//! the idle timeout: a client that sends requests and never reads the
//! answers is dropped instead of holding a connection slot for good.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

pub(crate) struct StallGuard<S> {
    inner: S,
    limit: Duration,
    /// Running while a write waits for the client to make room.
    deadline: Pin<Box<Sleep>>,
    waiting: bool,
    stalled: bool,
}

impl<S> StallGuard<S> {
    pub(crate) fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            waiting: false,
            stalled: false,
        }
    }

    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.waiting = false;
            return polled;
        }
        if !self.waiting {
            self.waiting = true;
            self.deadline.as_mut().reset(Instant::now() + self.limit);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stalled = true;
                Poll::Ready(Err(stall_error()))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

fn stall_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading responses")
}

impl<S: AsyncRead + Unpin> AsyncRead for StallGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallGuard<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.stalled {
            return Poll::Ready(Err(stall_error()));
        }
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.check(cx, polled)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.stalled {
            return Poll::Ready(Err(stall_error()));
        }
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        if this.stalled {
            return polled;
        }
        this.check(cx, polled)
    }
}
