//! Connection slots: who may hold how many connections to greenupd, so no ordinary
//! user, and no host that can reach the TCP port, can crowd out the nodes.
//!
//! Three kinds of slot, counted apart:
//! - the nodes': root and SlurmUser, on either listener, up to `--max-connections`;
//! - an ordinary user's: at most `daemon.user_connections` per uid and
//!   `daemon.users_connections` for all users, on each listener;
//! - pending: a TCP connection whose caller is not known yet (no request has
//!   carried a valid MUNGE credential). At most `daemon.unauthenticated`; when they
//!   are all taken, the oldest idle one is shed for the newcomer. A pending
//!   connection becomes a node's or a user's once a request authenticates.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use greenup::site::DaemonLimits;

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Listener {
    /// `daemon.listen`.
    Tcp,
    /// `daemon.socket`.
    Unix,
}

impl Listener {
    fn name(self) -> &'static str {
        match self {
            Listener::Tcp => "tcp",
            Listener::Unix => "unix",
        }
    }
}

/// Whose a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// Root or SlurmUser.
    Node,
    /// An ordinary user.
    User(u32),
    /// Not authenticated yet; the key orders pending connections by arrival.
    Pending(u64),
}

struct PendingConn {
    idle: bool,
    shed: Arc<Notify>,
}

#[derive(Default)]
struct Counts {
    nodes: usize,
    users: HashMap<Listener, usize>,
    per_uid: HashMap<(Listener, u32), usize>,
    pending: BTreeMap<u64, PendingConn>,
    next: u64,
}

/// Why a connection got no slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// For the log: which limit, on which listener.
    pub kind: &'static str,
    /// For the client's `busy` reply.
    pub message: String,
}

/// Every connection's slot.
#[derive(Default)]
pub(super) struct Slots {
    counts: Mutex<Counts>,
    log: Mutex<HashMap<&'static str, (Option<Instant>, u64)>>,
}

/// A connection's slot, given back when dropped.
pub(super) struct Slot {
    slots: Arc<Slots>,
    listener: Listener,
    holder: Holder,
    shed: Option<Arc<Notify>>,
}

/// Least time between two log lines about refused connections of one kind.
const LOG_EVERY: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slots {
    /// A slot for a caller already known (the Unix socket's peer credentials).
    pub(super) fn known(
        self: &Arc<Self>,
        listener: Listener,
        uid: u32,
        node: bool,
        max_nodes: usize,
        limits: &DaemonLimits,
    ) -> Result<Slot, Refusal> {
        let holder = self.take(listener, uid, node, max_nodes, limits)?;
        Ok(Slot {
            slots: self.clone(),
            listener,
            holder,
            shed: None,
        })
    }

    /// A slot for a connection whose caller is not known yet, shedding the oldest idle
    /// such connection when all are taken.
    pub(super) fn pending(
        self: &Arc<Self>,
        listener: Listener,
        limits: &DaemonLimits,
    ) -> Result<Slot, Refusal> {
        let mut c = lock(&self.counts);
        if c.pending.len() >= limits.unauthenticated {
            let oldest_idle = c.pending.iter().find(|(_, p)| p.idle).map(|(k, _)| *k);
            match oldest_idle.and_then(|k| c.pending.remove(&k)) {
                Some(p) => {
                    p.shed.notify_one();
                    drop(c);
                    let _ = self.note(&Refusal {
                        kind: "shed",
                        message: format!(
                            "the oldest idle unauthenticated connection was closed for a new one (daemon.unauthenticated: {})",
                            limits.unauthenticated
                        ),
                    });
                    c = lock(&self.counts);
                }
                None => {
                    return Err(Refusal {
                        kind: "unauthenticated",
                        message: format!(
                            "greenupd holds its most unauthenticated connections ({}), none idle; retry",
                            limits.unauthenticated
                        ),
                    });
                }
            }
        }
        c.next += 1;
        let key = c.next;
        let shed = Arc::new(Notify::new());
        c.pending.insert(
            key,
            // Nothing of it is being served yet: it is as sheddable as one waiting for
            // its next line.
            PendingConn {
                idle: true,
                shed: shed.clone(),
            },
        );
        Ok(Slot {
            slots: self.clone(),
            listener,
            holder: Holder::Pending(key),
            shed: Some(shed),
        })
    }

    fn take(
        &self,
        listener: Listener,
        uid: u32,
        node: bool,
        max_nodes: usize,
        limits: &DaemonLimits,
    ) -> Result<Holder, Refusal> {
        let mut c = lock(&self.counts);
        if node {
            if c.nodes >= max_nodes {
                return Err(Refusal {
                    kind: "nodes",
                    message: format!(
                        "greenupd is serving its most connections from root and SlurmUser ({max_nodes}); retry"
                    ),
                });
            }
            c.nodes += 1;
            return Ok(Holder::Node);
        }
        let mine = c.per_uid.get(&(listener, uid)).copied().unwrap_or(0);
        if mine >= limits.user_connections {
            return Err(Refusal {
                kind: "user",
                message: format!(
                    "uid {uid} holds its most connections on the {} listener ({}, daemon.user_connections); close one and retry",
                    listener.name(),
                    limits.user_connections
                ),
            });
        }
        let all = c.users.get(&listener).copied().unwrap_or(0);
        if all >= limits.users_connections {
            return Err(Refusal {
                kind: "users",
                message: format!(
                    "users hold the most connections on the {} listener ({}, daemon.users_connections); retry",
                    listener.name(),
                    limits.users_connections
                ),
            });
        }
        *c.per_uid.entry((listener, uid)).or_default() += 1;
        *c.users.entry(listener).or_default() += 1;
        Ok(Holder::User(uid))
    }

    fn give_back(&self, listener: Listener, holder: Holder) {
        let mut c = lock(&self.counts);
        match holder {
            Holder::Node => c.nodes = c.nodes.saturating_sub(1),
            Holder::User(uid) => {
                if let Some(n) = c.users.get_mut(&listener) {
                    *n = n.saturating_sub(1);
                }
                if let Some(n) = c.per_uid.get_mut(&(listener, uid)) {
                    *n -= 1;
                    if *n == 0 {
                        c.per_uid.remove(&(listener, uid));
                    }
                }
            }
            Holder::Pending(key) => {
                c.pending.remove(&key);
            }
        }
    }

    /// Connections held now, of every kind.
    pub(super) fn held(&self) -> usize {
        let c = lock(&self.counts);
        c.nodes + c.users.values().sum::<usize>() + c.pending.len()
    }

    /// Log a refusal, at most once a second per kind, with how many were not logged;
    /// returns whether this one was.
    pub(super) fn note(&self, r: &Refusal) -> bool {
        let mut log = lock(&self.log);
        let (last, quiet) = log.entry(r.kind).or_insert((None, 0));
        if last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            *quiet += 1;
            return false;
        }
        let more = std::mem::take(quiet);
        *last = Some(Instant::now());
        drop(log);
        tracing::warn!(
            limit = r.kind,
            not_logged_since = more,
            "connection refused: {}",
            r.message
        );
        true
    }
}

impl Slot {
    /// Whether the caller is not known yet.
    pub(super) fn is_pending(&self) -> bool {
        matches!(self.holder, Holder::Pending(_))
    }

    /// Mark a pending connection as waiting for a line (sheddable) or not; `false` if it
    /// was shed already.
    pub(super) fn set_idle(&self, idle: bool) -> bool {
        let Holder::Pending(key) = self.holder else {
            return true;
        };
        match lock(&self.slots.counts).pending.get_mut(&key) {
            Some(p) => {
                p.idle = idle;
                true
            }
            None => false,
        }
    }

    /// Completes when this pending connection is shed; never for any other.
    pub(super) async fn shed(&self) {
        match &self.shed {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    }

    /// Turn a pending slot into the authenticated caller's; on refusal the pending
    /// slot is kept until the connection closes.
    pub(super) fn authenticated(
        &mut self,
        uid: u32,
        node: bool,
        max_nodes: usize,
        limits: &DaemonLimits,
    ) -> Result<(), Refusal> {
        let Holder::Pending(key) = self.holder else {
            return Ok(());
        };
        let holder = self
            .slots
            .take(self.listener, uid, node, max_nodes, limits)?;
        lock(&self.slots.counts).pending.remove(&key);
        self.holder = holder;
        self.shed = None;
        Ok(())
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("listener", &self.listener)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.give_back(self.listener, self.holder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_user: usize, users: usize, pending: usize) -> DaemonLimits {
        DaemonLimits {
            max_job_nodes: 10,
            user_connections: per_user,
            users_connections: users,
            unauthenticated: pending,
        }
    }

    #[test]
    fn users_are_limited_per_uid_and_per_listener_and_never_touch_the_nodes() {
        let s = Arc::new(Slots::default());
        let l = limits(2, 3, 1);
        let a: Vec<Slot> = (0..2)
            .map(|_| s.known(Listener::Unix, 1000, false, 1, &l).unwrap())
            .collect();
        assert_eq!(
            s.known(Listener::Unix, 1000, false, 1, &l)
                .unwrap_err()
                .kind,
            "user"
        );
        // The same uid on the other listener has a count of its own.
        let tcp = s.known(Listener::Tcp, 1000, false, 1, &l).unwrap();
        let b = s.known(Listener::Unix, 1001, false, 1, &l).unwrap();
        assert_eq!(
            s.known(Listener::Unix, 1002, false, 1, &l)
                .unwrap_err()
                .kind,
            "users"
        );
        // With every user slot taken, root still gets the one node slot.
        let root = s.known(Listener::Unix, 0, true, 1, &l).unwrap();
        assert_eq!(
            s.known(Listener::Tcp, 0, true, 1, &l).unwrap_err().kind,
            "nodes"
        );
        assert_eq!(s.held(), 5);
        drop((a, tcp, b, root));
        assert_eq!(s.held(), 0);
    }

    #[test]
    fn a_flood_of_refusals_logs_one_line_a_second_per_limit() {
        let s = Slots::default();
        let r = |kind| Refusal {
            kind,
            message: String::new(),
        };
        let logged = (0..1_000).filter(|_| s.note(&r("user"))).count();
        // A thousand refusals within a second (they take microseconds): one line,
        // and another limit still gets its own.
        assert_eq!(logged, 1);
        assert!(s.note(&r("unauthenticated")));
        assert_eq!(lock(&s.log)["user"].1, 999);
    }

    #[test]
    fn the_oldest_idle_pending_connection_is_shed_and_busy_ones_are_kept() {
        let s = Arc::new(Slots::default());
        let l = limits(1, 1, 2);
        let first = s.pending(Listener::Tcp, &l).unwrap();
        let second = s.pending(Listener::Tcp, &l).unwrap();
        // Both are being served (a line was read): nothing can be shed.
        assert!(first.set_idle(false) && second.set_idle(false));
        assert_eq!(
            s.pending(Listener::Tcp, &l).unwrap_err().kind,
            "unauthenticated"
        );
        second.set_idle(true);
        first.set_idle(true);
        let third = s.pending(Listener::Tcp, &l).unwrap();
        // `first` arrived first: it goes, and learns so at its next wait.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), first.shed())
                .await
                .expect("the oldest idle connection is shed");
        });
        assert_eq!(s.held(), 2);
        // Its line, had one come as it was shed, is not served.
        assert!(!first.set_idle(false));
        // A pending connection that authenticates moves to its caller's slot.
        let mut third = third;
        third.authenticated(0, true, 1, &l).unwrap();
        assert!(!third.is_pending());
        drop((first, second));
        assert_eq!(s.held(), 1);
    }

    #[test]
    fn a_newcomer_is_sheddable_only_after_every_older_idle_connection() {
        let s = Arc::new(Slots::default());
        let l = limits(1, 1, 2);
        // Two connections arrive and nothing of them has been read yet.
        let older = s.pending(Listener::Tcp, &l).unwrap();
        let newer = s.pending(Listener::Tcp, &l).unwrap();
        // A third sheds the older, then a fourth the newer: arrival order, whoever
        // ran first.
        let _third = s.pending(Listener::Tcp, &l).unwrap();
        assert!(!older.set_idle(true));
        assert!(newer.set_idle(true));
        let _fourth = s.pending(Listener::Tcp, &l).unwrap();
        assert!(!newer.set_idle(true));
        assert_eq!(s.held(), 2);
    }
}
