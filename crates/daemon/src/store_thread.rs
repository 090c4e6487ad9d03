//! The store's own thread: it owns the database connection, applies writes in
//! groups (one fsync for many changes) and answers reads.
//!
//! Group commit is what lets many nodes report at once on a disk that can
//! sync only a few hundred times a second; no change is acknowledged before
//! the commit that holds it is on disk.

use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::store::{Applied, Change, Store, StoreError};

/// Most changes committed together: the outcomes of a large job's epilogs arrive at once, and each group costs one fsync.
const MAX_GROUP: usize = 4096;

type ReadFn = Box<dyn FnOnce(&mut dyn Store) + Send>;

enum Op {
    // Boxed: a change (a node's outcome) is large beside a read.
    Write(Box<Change>, oneshot::Sender<Result<Applied, StoreError>>),
    Read(ReadFn),
}

/// A cheap, cloneable handle to the store thread.
#[derive(Clone)]
pub struct StoreHandle {
    tx: mpsc::Sender<Op>,
}

impl StoreHandle {
    /// Move `store` onto its own thread. The thread ends when every handle is dropped.
    pub fn spawn(mut store: Box<dyn Store>) -> std::io::Result<(StoreHandle, JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel::<Op>();
        let join = std::thread::Builder::new()
            .name("greenup-store".into())
            .spawn(move || {
                let mut writes: Vec<(Change, oneshot::Sender<Result<Applied, StoreError>>)> =
                    Vec::new();
                let mut reads: Vec<ReadFn> = Vec::new();
                while let Ok(first) = rx.recv() {
                    let mut next = Some(first);
                    while let Some(op) = next.take() {
                        match op {
                            Op::Write(c, reply) => writes.push((*c, reply)),
                            Op::Read(f) => reads.push(f),
                        }
                        if writes.len() + reads.len() < MAX_GROUP {
                            next = rx.try_recv().ok();
                        }
                    }
                    if !writes.is_empty() {
                        let (changes, replies): (Vec<Change>, Vec<_>) = writes.drain(..).unzip();
                        let results = store.apply(&changes);
                        for (reply, r) in replies.into_iter().zip(results) {
                            let _ = reply.send(r);
                        }
                    }
                    // Reads run after the writes that arrived with them are committed, so
                    // nothing read can be undone by a failing commit.
                    for f in reads.drain(..) {
                        f(store.as_mut());
                    }
                }
            })?;
        Ok((StoreHandle { tx }, join))
    }

    /// Apply one change; returns once it is committed (or failed).
    pub async fn write(&self, change: Change) -> Result<Applied, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Op::Write(Box::new(change), tx))
            .map_err(|_| StoreError::Write("the store thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Write("the store thread has stopped".into()))?
    }

    /// Run `f` against the store on its thread and return its result.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        let op = Op::Read(Box::new(move |s: &mut dyn Store| {
            let _ = tx.send(f(s));
        }));
        self.tx
            .send(op)
            .map_err(|_| StoreError::Read("the store thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Read("the store thread has stopped".into()))?
    }
}
