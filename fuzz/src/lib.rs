//! The fuzz targets' library: everything they share lives in `lro-testkit` (the workspace's
//! single place for test harness code): the reference frame reader (`lro_testkit::oracle`),
//! the structured input and the target drivers (`lro_testkit::structured`, with its `gre`
//! module), the recording sink (`lro_testkit::frame`), the invariant checker
//! (`lro_testkit::check`) and the parser's check against the reference
//! (`lro_testkit::parser`). Every check panics with a description, which libFuzzer reports as
//! a crash.

pub use lro_testkit::structured::gre;
pub use lro_testkit::structured::{self as scenario, coalesce, rss_sorted};
pub use lro_testkit::{built, check, frame, oracle, parser};
