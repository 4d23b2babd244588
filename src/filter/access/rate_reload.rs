//! Rate-limit counts that survive a reload: a SIGHUP builds every route's
//! filters anew, and a fresh table would hand every client a full burst again
//! (a client held at its limit could reset it by waiting for any reload). So
//! the tables are found by their rule, the route's host and path with every
//! setting of its limit, in a process-wide list of weak references: a reload
//! builds the new configuration while the running one (and so its tables) is
//! alive, and a rule found unchanged gets the running table itself. A changed
//! rule starts afresh, and a table goes when the last configuration using it
//! does. The list's lock is taken only while a configuration is built, never
//! by a request.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::rate_limit::{GcraTable, RateKey};

/// What makes two rate limits the same rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateRule {
    /// The route's host and path prefix (`None` host: any).
    pub route: (Option<String>, String),
    /// What requests are counted by.
    pub key: RateKey,
    /// The emission interval.
    pub per_request: Duration,
    /// Requests allowed at once.
    pub burst: u32,
    /// The table's size.
    pub max_keys: usize,
}

/// Tables of the configurations alive, by rule.
static RUNNING: Mutex<Vec<(RateRule, Weak<GcraTable>)>> = Mutex::new(Vec::new());

/// The table of `rule`: the running one when a live configuration has the
/// same rule, else a new one, listed for the next reload.
pub(super) fn table_for(rule: &RateRule) -> Arc<GcraTable> {
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    running.retain(|(_, t)| t.strong_count() > 0);
    if let Some(table) = running
        .iter()
        .find(|(r, _)| r == rule)
        .and_then(|(_, t)| t.upgrade())
    {
        return table;
    }
    let table = Arc::new(GcraTable::new(rule.per_request, rule.burst, rule.max_keys));
    running.push((rule.clone(), Arc::downgrade(&table)));
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, burst: u32) -> RateRule {
        RateRule {
            route: (Some("reload.test".into()), path.into()),
            key: RateKey::ClientAddress,
            per_request: Duration::from_secs(1),
            burst,
            max_keys: 64,
        }
    }

    #[test]
    fn an_unchanged_rule_keeps_its_table_while_a_configuration_holds_it() {
        let running = table_for(&rule("/unchanged", 5));
        // The same rule: the same table; another burst or route: a new one.
        assert!(Arc::ptr_eq(&running, &table_for(&rule("/unchanged", 5))));
        assert!(!Arc::ptr_eq(&running, &table_for(&rule("/unchanged", 6))));
        assert!(!Arc::ptr_eq(&running, &table_for(&rule("/other", 5))));
        // Once no configuration holds it, the rule starts afresh.
        let weak = Arc::downgrade(&running);
        drop(running);
        assert!(weak.upgrade().is_none());
        let again = table_for(&rule("/unchanged", 5));
        assert!(weak.upgrade().is_none() && Arc::strong_count(&again) == 1);
    }
}
