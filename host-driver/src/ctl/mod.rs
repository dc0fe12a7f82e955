//! Controller API.
