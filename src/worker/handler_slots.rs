//! Per-worker state of handlers, each kind in a slot of its own (h2o's
//! `on_context_init`): the worker names no handler type, and a handler that
//! needs state of its own (reusable buffers, open files) declares the type and
//! takes its slot on first use, with no registration anywhere else.

use std::any::Any;
use std::cell::OnceCell;

/// Kinds of handler state a generation can hold; a linear scan of this many
/// type ids costs less than hashing one.
const SLOTS: usize = 8;

/// One value per handler state type, made on first use and dropped with the
/// generation, so a reload starts each handler afresh.
#[derive(Default)]
pub struct HandlerSlots {
    slots: [OnceCell<Box<dyn Any>>; SLOTS],
}

impl HandlerSlots {
    /// The handler state of type `T`, made with `T::default()` on first use.
    ///
    /// # Panics
    ///
    /// When more than [`SLOTS`] kinds of state are asked for: the kinds are
    /// the tree's own handler types, a fixed set that a unit test counts.
    pub fn get<T: Any + Default>(&self) -> &T {
        for slot in &self.slots {
            let held = slot.get_or_init(|| Box::new(T::default()));
            if let Some(state) = held.downcast_ref::<T>() {
                return state;
            }
        }
        panic!("more kinds of handler state than the worker has slots for");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[derive(Default)]
    struct Counter(Cell<u32>);
    #[derive(Default)]
    struct Other(Cell<u32>);

    #[test]
    fn each_type_gets_one_slot_kept_between_uses() {
        let slots = HandlerSlots::default();
        slots.get::<Counter>().0.set(3);
        slots.get::<Other>().0.set(7);
        assert_eq!(slots.get::<Counter>().0.get(), 3);
        assert_eq!(slots.get::<Other>().0.get(), 7);
        assert_eq!(slots.slots.iter().filter(|s| s.get().is_some()).count(), 2);
    }

    #[test]
    fn the_tree_s_handler_states_fit_the_slots() {
        let slots = HandlerSlots::default();
        slots.get::<crate::handler::proxy::ProxyBuffers>();
        slots.get::<crate::handler::static_files::OpenFileCache>();
        assert!(slots.slots.iter().filter(|s| s.get().is_some()).count() < SLOTS);
    }
}
