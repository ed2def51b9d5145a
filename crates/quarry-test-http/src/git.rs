//! Git repositories over HTTP for tests: `git http-backend` (which ships with Git) behind
//! the loopback server, optionally behind HTTP basic authentication.

use std::path::Path;
use std::process::Command;

use crate::server::{Reply, Request, Server, cgi};

/// The user name a token is sent with (what Quarry's Git sources send).
pub const TOKEN_USER: &str = "x-access-token";

/// Serves every repository under `root` (`{root}/handbook.git` at `/handbook.git`), clone
/// and fetch; with `token`, a request without `x-access-token:{token}` as basic
/// authentication gets a 401 asking for it.
pub fn serve(root: &Path, token: Option<&str>) -> Server {
    let root = root.to_path_buf();
    let expected = token.map(|t| {
        format!(
            "Basic {}",
            quarry_core::base64_encode(format!("{TOKEN_USER}:{t}").as_bytes())
        )
    });
    Server::start(move |req: &Request| {
        if let Some(expected) = &expected
            && req.header("authorization") != Some(expected.as_str())
        {
            return Reply::status(401, "text/plain", "authentication required")
                .header("WWW-Authenticate", "Basic realm=\"git\"");
        }
        let mut git = Command::new("git");
        git.arg("http-backend")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_PROJECT_ROOT", &root)
            .env("GIT_HTTP_EXPORT_ALL", "1");
        cgi(git, req)
    })
}

/// Runs `git` in `dir` as a test's author (a fixed name and address, `main` as the first
/// branch, no signing) and returns its standard output.
///
/// # Panics
/// When `git` cannot start or fails (the test cannot go on).
pub fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=Tester",
            "-c",
            "user.email=tester@example.com",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
