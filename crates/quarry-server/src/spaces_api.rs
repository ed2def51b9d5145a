//! Spaces, their members and roles, and users, over REST (the web UI's Access page).

use std::sync::Arc;

use axum::Router;

use crate::AppState;

pub fn router() -> Router<Arc<AppState>> {
    Router::new()
}
