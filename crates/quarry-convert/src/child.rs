//! The child's side of [`Isolation::Child`]: the hidden entry point that converts one file
//! under rlimits and answers on stdout (`isolate.rs` has the parent's side and the wire
//! format).

use std::io::{Read, Write};
use std::process::ExitCode;

use crate::dispatch::convert;
use crate::isolate::{KILL_GRACE, decode_request, encode_answer};
use crate::types::{ConvertOptions, Isolation, Limits};

/// The child's side: reads a request on stdin, limits itself, converts, writes the answer on
/// stdout. The `quarry` binary calls this for its hidden `__convert` command.
pub fn child_main() -> ExitCode {
    die_with_parent();
    let mut input = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut input).is_err() {
        return ExitCode::FAILURE;
    }
    let Some((file_name, opts, bytes)) = decode_request(&input) else {
        eprintln!("quarry: malformed conversion request");
        return ExitCode::FAILURE;
    };
    if let Err(e) = limit_self(&opts.limits) {
        eprintln!("quarry: cannot limit the converter: {e}");
        return ExitCode::FAILURE;
    }
    let opts = ConvertOptions {
        isolation: Isolation::InProcess,
        ..opts
    };
    let result = convert(&file_name, bytes, &opts);
    let mut out = Vec::new();
    encode_answer(&mut out, &result);
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(&out)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    // An abandoned converter thread (cooperative timeout) must not keep the process alive.
    std::process::exit(0)
}

/// A converter whose parent died (a server killed mid-conversion) stops with it rather than
/// burning CPU for nobody. The parent's spawning thread waits for this child, so the
/// thread-scoped signal only fires when the parent is gone.
#[cfg(target_os = "linux")]
fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent() {}

/// Address space, CPU time and core files of this (child) process.
#[cfg(unix)]
fn limit_self(limits: &Limits) -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let lim = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct we pass and changes only this process's limits.
        if unsafe { libc::setrlimit(resource, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    set(libc::RLIMIT_CORE, 0)?;
    if limits.max_memory_bytes > 0 {
        set(libc::RLIMIT_AS, limits.max_memory_bytes)?;
    }
    // CPU seconds can only exceed wall seconds with threads; the parent's wall-time kill
    // is the real bound, this one catches a child orphaned by a dead parent.
    set(
        libc::RLIMIT_CPU,
        limits.timeout.saturating_add(KILL_GRACE).as_secs().max(1) * 2,
    )?;
    Ok(())
}

#[cfg(not(unix))]
fn limit_self(_limits: &Limits) -> std::io::Result<()> {
    Ok(())
}
