//! Helpers shared by the codec's unit tests: the request, response and body
//! tests each check lists of raw inputs that must all give one outcome.

use std::fmt::Debug;

/// Asserts that `check` gives `want` for every input; a failure names the
/// input as escaped text, as it is written in the test.
#[track_caller]
pub(crate) fn assert_each<T: PartialEq + Debug>(
    check: impl Fn(&[u8]) -> T,
    want: T,
    inputs: &[&[u8]],
) {
    for input in inputs {
        assert_eq!(check(input), want, "input: {}", input.escape_ascii());
    }
}
