//! Every `Java_…` export. (Minimal module from the `hook` branch: the lead merges it with the
//! agent helper's `OomGuard` facade.)

pub mod probe;
