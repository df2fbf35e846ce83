//! Empty: this crate exists for the features it asks of its dependencies
//! (its manifest says why).
