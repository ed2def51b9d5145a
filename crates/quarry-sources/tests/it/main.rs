//! quarry-sources against real peers: Git repositories served by `git http-backend` on
//! loopback (public and private), S3 buckets on an S3-compatible server (moto), folders on a
//! WebDAV server (`rclone serve webdav`), web sites on the loopback test server, and folders
//! on disk.

mod git;
mod guard;
mod s3;
mod site;
mod support;
mod webdav;
