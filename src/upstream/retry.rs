//! The retry policy, as a pure function of what is known about a failed
//! attempt, so every case is a unit test rather than a path through the
//! proxy's IO.
//!
//! The rules, as nginx's `proxy_next_upstream` defaults and RFC 9110 §9.2.2
//! shape them:
//! - a failed connect sent nothing: any request may go to another server
//!   while retries are left;
//! - a connection that fails before any response byte (reset, closed, a write
//!   that failed) may have lost the request unseen: a connection reused from
//!   the pool is retried once on a fresh one (the upstream closed it while it
//!   was idle, a race no request is to blame for), otherwise only idempotent
//!   requests go to another server. Either way the whole request must still be
//!   in the buffer;
//! - once the upstream answered anything — an interim 1xx, part of a head — the
//!   request reached it and is never sent again, nor after a timeout (the
//!   upstream may still be working on it) or bytes that do not parse.

use super::ErrorKind;

/// How an attempt on an upstream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptFailure {
    /// The connect (or TLS handshake) failed: nothing was sent.
    Connect,
    /// The request was being sent or answered when the attempt failed.
    Exchange(FailedExchange),
}

/// What is known about an exchange that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailedExchange {
    /// The connection came from the pool.
    pub reused: bool,
    /// The whole request is still buffered, so it can be sent again.
    pub replayable: bool,
    /// An interim 1xx head arrived (and went on to the client): the request
    /// reached the upstream, and the client has part of its answer.
    pub interim: bool,
    /// Writing the request failed, with this kind.
    pub write: Option<ErrorKind>,
    /// Reading the response head failed, with this kind, and whether no byte
    /// of a response had arrived; `None` when it was not read (a write that
    /// timed out) or succeeded.
    pub head: Option<(ErrorKind, bool)>,
}

impl FailedExchange {
    /// Whether the attempt failed before the upstream answered anything, so
    /// that it may not have seen the request.
    pub fn unanswered(&self) -> bool {
        match (self.write, self.head) {
            (Some(ErrorKind::Timeout), _) => true,
            (_, Some((kind, nothing_received))) => {
                nothing_received
                    && !self.interim
                    && (kind == ErrorKind::Reset || self.write.is_some())
            }
            (_, None) => false,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again on a fresh connection, the pool left alone.
    Fresh,
    /// Try another server (the failed one counts as tried).
    Another,
    /// Answer the client with the error.
    GiveUp,
}

/// The decision, and whether the failure counts against the server's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryDecision {
    /// What to do next.
    pub retry: Retry,
    /// Count the failure against the server (passive health). A reused
    /// connection that died unanswered says nothing about the server.
    pub count_failure: bool,
}

/// The retries one request has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    /// Attempts on another server still allowed (the group's `retries`).
    pub other_servers: u32,
    /// The one retry on a fresh connection after a reused one died is unused.
    pub stale_retry: bool,
}

impl RetryBudget {
    /// The budget of a request to a group allowing `retries`.
    pub fn new(retries: u32) -> Self {
        RetryBudget {
            other_servers: retries,
            stale_retry: true,
        }
    }
}

/// Decides what follows a failed attempt of a request (`idempotent` per RFC
/// 9110 §9.2.2), spending from `budget`.
pub fn decide_retry(
    budget: &mut RetryBudget,
    failure: AttemptFailure,
    idempotent: bool,
) -> RetryDecision {
    let another = |budget: &mut RetryBudget| {
        if budget.other_servers > 0 {
            budget.other_servers -= 1;
            Retry::Another
        } else {
            Retry::GiveUp
        }
    };
    let x = match failure {
        AttemptFailure::Connect => {
            return RetryDecision {
                retry: another(budget),
                count_failure: true,
            }
        }
        AttemptFailure::Exchange(x) => x,
    };
    if !x.unanswered() {
        return RetryDecision {
            retry: Retry::GiveUp,
            count_failure: true,
        };
    }
    // A timed-out write may have delivered the request: not sent again.
    let replayable = x.replayable && x.write != Some(ErrorKind::Timeout);
    let retry = if !replayable {
        Retry::GiveUp
    } else if x.reused && budget.stale_retry {
        budget.stale_retry = false;
        Retry::Fresh
    } else if idempotent {
        another(budget)
    } else {
        Retry::GiveUp
    };
    RetryDecision {
        retry,
        count_failure: !x.reused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reset before any response byte, on a fresh connection, request buffered.
    const RESET: FailedExchange = FailedExchange {
        reused: false,
        replayable: true,
        interim: false,
        write: None,
        head: Some((ErrorKind::Reset, true)),
    };

    fn decide(budget: &mut RetryBudget, x: FailedExchange, idempotent: bool) -> RetryDecision {
        decide_retry(budget, AttemptFailure::Exchange(x), idempotent)
    }

    const fn give_up(count_failure: bool) -> RetryDecision {
        RetryDecision {
            retry: Retry::GiveUp,
            count_failure,
        }
    }

    const fn another(count_failure: bool) -> RetryDecision {
        RetryDecision {
            retry: Retry::Another,
            count_failure,
        }
    }

    /// An exchange failed like `x` is never resent, on a fresh connection or
    /// a pooled one; only the fresh one counts against the server.
    fn never_resent(x: FailedExchange) {
        let mut b = RetryBudget::new(5);
        for reused in [false, true] {
            let x = FailedExchange { reused, ..x };
            assert_eq!(decide(&mut b, x, true), give_up(!reused), "{x:?}");
        }
    }

    #[test]
    fn a_failed_connect_goes_to_another_server_for_any_method_while_retries_last() {
        let mut b = RetryBudget::new(2);
        for _ in 0..2 {
            let d = decide_retry(&mut b, AttemptFailure::Connect, false);
            assert_eq!(d, another(true));
        }
        assert_eq!(b.other_servers, 0);
        assert_eq!(
            decide_retry(&mut b, AttemptFailure::Connect, true),
            give_up(true)
        );
    }

    #[test]
    fn an_unanswered_fresh_connection_resends_idempotent_requests_only() {
        let mut b = RetryBudget::new(1);
        let d = decide(&mut b, RESET, true);
        assert_eq!(d, another(true));
        assert_eq!(
            decide(&mut b, RESET, true),
            give_up(true),
            "no retries left"
        );
        let mut b = RetryBudget::new(3);
        assert_eq!(decide(&mut b, RESET, false), give_up(true), "POST");
        assert_eq!(b.other_servers, 3);
    }

    #[test]
    fn a_dead_pooled_connection_is_retried_once_fresh_for_any_method_and_not_counted() {
        let reused = FailedExchange {
            reused: true,
            ..RESET
        };
        let mut b = RetryBudget::new(0);
        assert_eq!(
            decide(&mut b, reused, false),
            RetryDecision {
                retry: Retry::Fresh,
                count_failure: false
            }
        );
        assert!(!b.stale_retry);
        // A second dead pooled connection: the fresh retry is spent.
        assert_eq!(decide(&mut b, reused, false), give_up(false));
        let mut b = RetryBudget {
            other_servers: 1,
            stale_retry: false,
        };
        assert_eq!(decide(&mut b, reused, true), another(false));
    }

    #[test]
    fn an_interim_answer_means_the_request_arrived_and_is_never_resent() {
        let mut b = RetryBudget::new(5);
        for (reused, idempotent) in [(false, false), (false, true), (true, false), (true, true)] {
            let x = FailedExchange {
                reused,
                interim: true,
                ..RESET
            };
            assert_eq!(decide(&mut b, x, idempotent), give_up(true));
            // Also when the write failed after the interim head came.
            let x = FailedExchange {
                write: Some(ErrorKind::Reset),
                ..x
            };
            assert_eq!(decide(&mut b, x, idempotent), give_up(true));
        }
        assert_eq!(b, RetryBudget::new(5));
    }

    #[test]
    fn a_request_no_longer_buffered_whole_is_not_resent() {
        never_resent(FailedExchange {
            replayable: false,
            ..RESET
        });
    }

    #[test]
    fn a_timed_out_write_is_not_resent() {
        never_resent(FailedExchange {
            write: Some(ErrorKind::Timeout),
            head: None,
            ..RESET
        });
    }

    #[test]
    fn a_failed_write_counts_as_unanswered_while_no_response_byte_came() {
        let mut b = RetryBudget::new(1);
        // The write failed, then reading found nothing (closed, or even a
        // timeout): the request may not have arrived.
        for head_kind in [ErrorKind::Reset, ErrorKind::Timeout] {
            let x = FailedExchange {
                reused: true,
                write: Some(ErrorKind::Reset),
                head: Some((head_kind, true)),
                ..RESET
            };
            let mut b2 = b;
            assert_eq!(decide(&mut b2, x, false).retry, Retry::Fresh);
        }
        // Part of a response came before the close: answered.
        let x = FailedExchange {
            write: Some(ErrorKind::Reset),
            head: Some((ErrorKind::Reset, false)),
            ..RESET
        };
        assert_eq!(decide(&mut b, x, true), give_up(true));
    }

    #[test]
    fn timeouts_and_malformed_heads_are_not_resent_and_count_against_the_server() {
        let mut b = RetryBudget::new(5);
        for (kind, nothing_received) in [
            (ErrorKind::Timeout, true),
            (ErrorKind::Timeout, false),
            (ErrorKind::Malformed, false),
            (ErrorKind::Reset, false),
        ] {
            for reused in [false, true] {
                let x = FailedExchange {
                    reused,
                    head: Some((kind, nothing_received)),
                    ..RESET
                };
                assert_eq!(decide(&mut b, x, true), give_up(true), "{kind:?}");
            }
        }
        assert_eq!(b, RetryBudget::new(5));
    }
}
