//! greenupd's Prometheus listener: a minimal HTTP/1.1 responder that answers
//! `GET /metrics` with the text exposition and closes the connection.
//!
//! Bounded on purpose: a few connections at once, a small request, and a
//! deadline for reading it and for writing the answer, so a slow or hostile
//! scraper can never hold greenupd's runtime.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use greenup::report::metrics::{Budget, Snapshot};
use greenup_proto::protocol::{BudgetLine, Status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Scrapes served at once; more are closed unanswered.
const MAX_CONNECTIONS: usize = 8;
/// Largest request head read.
const MAX_REQUEST: usize = 8 * 1024;
/// Deadline for reading the request and, separately, for writing the answer.
const DEADLINE: Duration = Duration::from_secs(5);

/// Serve `page()` on `listener` as `GET /metrics` until the task is dropped.
pub async fn serve<F, Fut>(listener: TcpListener, page: F)
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = String> + Send,
{
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors and the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            continue;
        };
        let page = page.clone();
        tokio::spawn(async move {
            let _permit = permit;
            answer(stream, page).await;
        });
    }
}

/// The request line's method and path, once the whole head has arrived.
async fn read_head(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() >= MAX_REQUEST {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.lines().next()?.split_whitespace();
    let method = words.next()?.to_string();
    let target = words.next()?;
    let path = target.split('?').next().unwrap_or(target).to_string();
    Some((method, path))
}

async fn answer<F, Fut>(mut stream: TcpStream, page: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = String>,
{
    let (status, body, kind) = match tokio::time::timeout(DEADLINE, read_head(&mut stream)).await {
        Ok(Some((m, p))) if m == "GET" && p == "/metrics" => (
            "200 OK",
            page().await,
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        Ok(Some((m, _))) if m != "GET" => {
            ("405 Method Not Allowed", "only GET\n".into(), "text/plain")
        }
        Ok(Some(_)) => ("404 Not Found", "try /metrics\n".into(), "text/plain"),
        Ok(None) => ("400 Bad Request", "bad request\n".into(), "text/plain"),
        Err(_) => return,
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(DEADLINE, async {
        stream.write_all(reply.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// The parts of a metrics snapshot greenupd's status reply carries: the ledger, running
/// jobs and stored jobs. Decisions, fallbacks, errors and the store's size come from the
/// store.
pub fn snapshot_of(status: &Status) -> Snapshot {
    let budget = |l: &BudgetLine| Budget {
        name: l.scope.clone(),
        cap_w: l.cap_w.map(|w| w.0),
        reserved_w: l.reserved_w.0,
    };
    Snapshot {
        site: status.ledger.iter().find(|l| l.scope == "site").map(budget),
        partitions: status
            .ledger
            .iter()
            .filter(|l| l.scope != "site")
            .map(budget)
            .collect(),
        running_jobs: status.open_jobs,
        store_jobs: status.total_jobs,
        ..Snapshot::default()
    }
}
