//! The handlers' state as the webhook's tests build it: a view store and metrics of their
//! own, the default decision options and request budget.

use styrmin_webhook::api::AppState;
use styrmin_webhook::view::View;

/// A state that has no view yet: not ready until a source publishes one.
pub fn unready_state() -> AppState {
    AppState::default()
}

/// A state that serves `view`.
#[allow(dead_code)] // not every test binary that includes this module needs a view
pub fn state_serving(view: View) -> AppState {
    let state = unready_state();
    state.view_sink().publish(view);
    state
}
