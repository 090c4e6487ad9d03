//! The TCP and Unix listeners and their connection limits: one task per connection,
//! holding a slot (see [`super::slots`]), reading request lines and writing replies.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener};

use super::Shared;
use super::handlers::{Peer, answer, check_line};
use super::slots::{Listener, Refusal, Slot};
use crate::auth::Caller;
use greenup_proto::protocol::{ErrorCode, ErrorReply, MAX_LINE_BYTES, ReplyLine};

pub(super) async fn accept_tcp(shared: Arc<Shared>, listener: TcpListener) {
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
        // Anyone who reaches the port gets only a pending slot until a request carries
        // a valid credential. It is taken here, in the order the kernel handed the
        // connections over, not in the order their tasks first run: "the oldest idle
        // one is shed" must never pick a newcomer whose line has not been read yet.
        let slot = shared.slots.pending(Listener::Tcp, &shared.limits());
        let shared = shared.clone();
        tokio::spawn(async move {
            tracing::debug!(%addr, "connection");
            serve_conn(shared, stream, Peer::Tcp, Listener::Tcp, slot).await;
        });
    }
}

pub(super) async fn accept_unix(shared: Arc<Shared>, listener: UnixListener) {
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
        tokio::spawn(async move {
            let limits = shared.limits();
            let (peer, slot) = match stream.peer_cred() {
                Ok(c) => {
                    let caller = Caller {
                        uid: c.uid(),
                        gid: c.gid(),
                    };
                    let node = shared.is_node(caller.uid);
                    let max = shared.opts.max_connections;
                    let slot = shared
                        .slots
                        .known(Listener::Unix, caller.uid, node, max, &limits);
                    (Peer::Unix(caller), slot)
                }
                Err(e) => {
                    tracing::warn!("SO_PEERCRED failed: {e}");
                    (Peer::Tcp, shared.slots.pending(Listener::Unix, &limits))
                }
            };
            serve_conn(shared, stream, peer, Listener::Unix, slot).await;
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
    listener: Listener,
    slot: Result<Slot, Refusal>,
) {
    let (r, mut w) = tokio::io::split(stream);
    let mut slot = match slot {
        Ok(s) => s,
        Err(why) => {
            shared.slots.note(&why);
            write_reply(&mut w, &busy(&why)).await;
            return;
        }
    };
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let mut reader = BufReader::new(r);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_LINE_BYTES as u64 + 1);
        let read = limited.read_until(b'\n', &mut line);
        slot.set_idle(true);
        let got = tokio::select! {
            got = tokio::time::timeout(shared.opts.idle_timeout, read) => got,
            // Shed for a newer unauthenticated connection: close without a word.
            () = slot.shed() => break,
        };
        // Shed while its line arrived: it is closed as if the shed had come first, so
        // a connection no longer counted among the pending never goes on uncounted.
        if !slot.set_idle(false) {
            break;
        }
        match got {
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
        let checked = check_line(&shared, &line, peer).await;
        // The first request that authenticates moves the connection into its caller's
        // slots before it runs (a node's open_job may wait long for its decision); a
        // caller over its limit is told so and disconnected.
        if let (true, Ok((c, _))) = (slot.is_pending(), &checked) {
            let limits = shared.limits();
            let node = shared.is_node(c.uid);
            let max = shared.opts.max_connections;
            if let Err(why) = slot.authenticated(c.uid, node, max, &limits) {
                shared.slots.note(&why);
                write_reply(&mut w, &busy(&why)).await;
                break;
            }
        }
        // A client that hangs up before its reply (a prolog past its timeout) is gone:
        // its request is dropped where it stands rather than answered to nobody.
        let op = match &checked {
            Ok((_, Ok(req))) => req.op(),
            _ => "-",
        };
        let work = answer(&shared, checked);
        tokio::pin!(work);
        let reply = tokio::select! {
            reply = &mut work => reply,
            gone = hung_up(&mut reader) => {
                if gone {
                    // Debug only: at a large job's start, thousands of late prologs may go.
                    tracing::debug!(op, "client hung up before its reply: request dropped");
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
    tracing::trace!(listener = ?listener, "connection closed");
}

/// The `busy` reply for a refused connection.
fn busy(why: &Refusal) -> ReplyLine {
    ReplyLine::err(ErrorReply::new(ErrorCode::Busy, why.message.clone()))
}
