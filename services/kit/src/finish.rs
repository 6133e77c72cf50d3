//! [`to_the_end`]: work that, once begun, finishes even if whoever awaits it goes away.
//!
//! A request whose client leaves is dropped mid-way: hyper drops the handler of an HTTP
//! request whose connection closed, and tonic the handler of a cancelled call. Most work
//! may stop there. A change whose effects go on without it (a tree operation on the
//! blocking pool, a script Redis already has) must not: what follows it (announcing it
//! to the gateways' copies, releasing the locks of what it removed) must still be done.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `work` to its end: in the awaiting task while it waits (no task to spawn and
/// wake), and, if dropped before the end, in a task of its own on the current runtime.
pub fn to_the_end<T, Work>(work: Work) -> ToTheEnd<T>
where
    T: Send + 'static,
    Work: Future<Output = T> + Send + 'static,
{
    ToTheEnd(Some(Box::pin(work)))
}

/// The future [`to_the_end`] returns.
pub struct ToTheEnd<T: Send + 'static>(Option<Pin<Box<dyn Future<Output = T> + Send>>>);

impl<T: Send + 'static> Future for ToTheEnd<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(work) = self.0.as_mut() else {
            panic!("ToTheEnd polled after its end");
        };
        // Work that panicked is not handed on to be polled again.
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => {
                self.0 = None;
                Poll::Ready(output)
            }
            Err(panic) => {
                self.0 = None;
                std::panic::resume_unwind(panic)
            }
        }
    }
}

/// Dropped before its end: the rest goes to a task of its own. A runtime shutting down
/// drops that task too (a process that stops ends its lease streams, so the gateways
/// drop what they kept of it anyway).
impl<T: Send + 'static> Drop for ToTheEnd<T> {
    fn drop(&mut self) {
        if let Some(work) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(work);
                }
                Err(_) => {
                    tracing::warn!("work that was to run to its end was left unfinished: the runtime is gone")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn work_whose_caller_went_away_still_finishes() {
        let finished = Arc::new(AtomicBool::new(false));
        let (go, gone) = tokio::sync::oneshot::channel::<()>();
        let work = to_the_end({
            let finished = finished.clone();
            async move {
                let _ = gone.await;
                finished.store(true, Ordering::SeqCst);
            }
        });
        let caller = tokio::spawn(work);
        tokio::task::yield_now().await;
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        go.send(()).unwrap();
        for _ in 0..100 {
            if finished.load(Ordering::SeqCst) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the work stopped with its caller");
    }

    #[tokio::test]
    async fn work_that_panicked_is_not_polled_again() {
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let work = to_the_end({
            let polls = polls.clone();
            std::future::poll_fn(move |_| -> Poll<()> {
                polls.fetch_add(1, Ordering::SeqCst);
                panic!("the work failed");
            })
        });
        assert!(tokio::spawn(work).await.unwrap_err().is_panic());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn work_awaited_to_its_end_answers_in_place() {
        assert_eq!(to_the_end(async { 7 }).await, 7);
    }
}
