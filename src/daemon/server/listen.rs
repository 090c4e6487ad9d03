//! The TCP and Unix listeners and the connection limit: one task per connection,
//! reading request lines and writing reply lines.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;

use super::Shared;
use super::handlers::handle_line;
use crate::daemon::auth::Caller;
use crate::daemon::protocol::{ErrorCode, ErrorReply, MAX_LINE_BYTES, ReplyLine};

/// Where a connection came from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Peer {
    /// TCP: every request must carry a credential.
    Tcp,
    /// Unix socket: the kernel told us who it is.
    Unix(Caller),
}

pub(super) async fn accept_tcp(shared: Arc<Shared>, listener: TcpListener, limit: Arc<Semaphore>) {
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let limit = limit.clone();
        tokio::spawn(async move {
            tracing::debug!(%addr, "connection");
            serve_conn(shared, stream, Peer::Tcp, limit).await;
        });
    }
}

pub(super) async fn accept_unix(
    shared: Arc<Shared>,
    listener: UnixListener,
    limit: Arc<Semaphore>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let limit = limit.clone();
        tokio::spawn(async move {
            let peer = match stream.peer_cred() {
                Ok(c) => Peer::Unix(Caller {
                    uid: c.uid(),
                    gid: c.gid(),
                }),
                Err(e) => {
                    tracing::warn!("SO_PEERCRED failed: {e}");
                    Peer::Tcp
                }
            };
            serve_conn(shared, stream, peer, limit).await;
        });
    }
}

async fn write_reply<W: AsyncWrite + Unpin>(w: &mut W, reply: &ReplyLine) -> bool {
    let mut line = reply.to_line();
    // No client reads a longer line; say so instead of sending what it must drop.
    if line.len() > MAX_LINE_BYTES + 1 {
        let msg = format!(
            "the reply is {} bytes, more than the {MAX_LINE_BYTES} a line may hold",
            line.len() - 1
        );
        tracing::error!("{msg}");
        line = ReplyLine::err(ErrorReply::new(ErrorCode::TooLong, msg)).to_line();
    }
    matches!(
        tokio::time::timeout(Duration::from_secs(5), w.write_all(&line)).await,
        Ok(Ok(()))
    )
}

/// Whether the client closed its side (or the connection failed); `false` once it sent
/// more bytes, which stay buffered for the next read.
async fn hung_up<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> bool {
    reader.fill_buf().await.map_or(true, |b| b.is_empty())
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    stream: S,
    peer: Peer,
    limit: Arc<Semaphore>,
) {
    let (r, mut w) = tokio::io::split(stream);
    let Ok(_permit) = limit.try_acquire_owned() else {
        let busy = ErrorReply::new(
            ErrorCode::Busy,
            "greenupd is serving its maximum number of connections; retry",
        );
        write_reply(&mut w, &ReplyLine::err(busy)).await;
        return;
    };
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let mut reader = BufReader::new(r);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_LINE_BYTES as u64 + 1);
        let read = limited.read_until(b'\n', &mut line);
        match tokio::time::timeout(shared.opts.idle_timeout, read).await {
            Err(_) => {
                if !line.is_empty() {
                    let msg = format!(
                        "no complete line within {:?}; closing",
                        shared.opts.idle_timeout
                    );
                    write_reply(
                        &mut w,
                        &ReplyLine::err(ErrorReply::new(ErrorCode::Timeout, msg)),
                    )
                    .await;
                }
                break;
            }
            Ok(Err(_)) | Ok(Ok(0)) => break,
            Ok(Ok(_)) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE_BYTES {
                let msg =
                    format!("line longer than {MAX_LINE_BYTES} bytes; closing this connection");
                write_reply(
                    &mut w,
                    &ReplyLine::err(ErrorReply::new(ErrorCode::TooLong, msg)),
                )
                .await;
            }
            // Otherwise the client hung up mid-line: nothing to answer.
            break;
        }
        // A client that hangs up before its reply (a prolog past its timeout) is gone:
        // its request is dropped where it stands rather than answered to nobody.
        let work = handle_line(&shared, &line, peer);
        tokio::pin!(work);
        let reply = tokio::select! {
            reply = &mut work => reply,
            gone = hung_up(&mut reader) => {
                if gone {
                    break;
                }
                // The next request arrived early: finish this one first.
                work.await
            }
        };
        if !write_reply(&mut w, &reply).await {
            break;
        }
    }
    let _ = w.shutdown().await;
    shared.connections.fetch_sub(1, Ordering::Relaxed);
}
