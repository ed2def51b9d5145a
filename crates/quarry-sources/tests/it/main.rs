//! quarry-sources against real peers: Git repositories served by `git http-backend` on
//! loopback (public and private), and folders on disk.

mod git;
