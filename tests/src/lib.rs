//! # mrc-tests: whole-system tests
