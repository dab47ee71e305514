//! The optimizer: canonicalization and equality saturation with egg, fusing ops into kernels and
//! choosing their schedules. (Being built: see issue 3.)

#![warn(missing_docs)]
