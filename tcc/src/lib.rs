//! tcc library (TODO)
