//! `kubedav`: one binary, many targets. `--target=all` runs every service in one process
//! (the gateway calls the cores directly); any other target runs one service, as each
//! Kubernetes Deployment does.

#[allow(unsafe_code)] // jemalloc's configuration symbol (`export_name`)
mod allocator;
mod cli;
mod run;
mod secrets;
mod smoke;

use clap::Parser;
use std::process::ExitCode;

/// The async runtime a target runs on: a worker per core, but one for the locks service
/// unless `TOKIO_WORKER_THREADS` says otherwise. Its calls are small and come one at a
/// time from each gateway, so a second worker mostly wakes up to find nothing to steal:
/// with one, a LOCK + UNLOCK pair costs the locks process about a quarter less CPU
/// (docs/benchmarks.md, 2026-12-06 (2)).
fn runtime_for(target: cli::Target) -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if target == cli::Target::Locks && std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(1);
    }
    builder
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Some(cli::Command::Passwd { file, user }) = &cli.command {
        return match passwd(file, user) {
            Ok(message) => {
                println!("{message}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("kubedav passwd: {message}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(cli::Command::AwaitFolder {
        folder,
        timeout_seconds,
    }) = &cli.command
    {
        return await_folder(folder, *timeout_seconds);
    }
    if let Some(cli::Command::Convert {
        file,
        content_type,
        content,
        front_matter,
        base_url,
    }) = &cli.command
    {
        let options = kubedav_markdown::Options {
            content: (*content).into(),
            front_matter: *front_matter,
            base_url: base_url.clone(),
            ..kubedav_markdown::Options::default()
        };
        return convert(file, content_type, &options);
    }
    let runtime = match runtime_for(cli.target).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kubedav: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(cli::Command::Smoke { url, user, password }) = &cli.command {
        return match runtime.block_on(smoke::run(url, user.clone(), password.clone())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("kubedav smoke: {message}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(cli::Command::EnsureSecrets {
        users,
        random,
        labels,
        api_server,
        token_file,
        ca_file,
        namespace,
    }) = &cli.command
    {
        return match runtime.block_on(ensure_secrets(
            users,
            random,
            labels,
            secrets::Connection::in_cluster(
                api_server.clone(),
                token_file.clone(),
                ca_file.clone(),
                namespace.clone(),
            ),
        )) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("kubedav ensure-secrets: {message}");
                ExitCode::FAILURE
            }
        };
    }
    match runtime.block_on(run::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            eprintln!("kubedav: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `kubedav ensure-secrets`: one line per Secret.
async fn ensure_secrets(
    users: &[String],
    random: &[secrets::Wanted],
    labels: &[(String, String)],
    connection: Result<secrets::Connection, String>,
) -> Result<(), String> {
    let connection = connection?;
    let wanted: Vec<secrets::Wanted> = users
        .iter()
        .map(|name| secrets::Wanted::Users { name: name.clone() })
        .chain(random.iter().cloned())
        .collect();
    for (name, outcome) in secrets::ensure(&connection, &wanted, labels).await? {
        let what = match outcome {
            secrets::Outcome::Created => "created",
            secrets::Outcome::Kept => "exists, kept as it is",
            secrets::Outcome::TakenOverFromHelm => {
                "exists, rendered by an earlier chart: annotated helm.sh/resource-policy=keep so the upgrade keeps it"
            }
        };
        println!("Secret {}/{name}: {what}", connection.namespace);
    }
    Ok(())
}

/// `kubedav passwd FILE USER`.
fn passwd(file: &std::path::Path, user: &str) -> Result<String, String> {
    use std::io::{BufRead, IsTerminal, Write};
    let password = if std::io::stdin().is_terminal() {
        eprint!("password for {user} (not shown): ");
        let _ = std::io::stderr().flush();
        let password = read_hidden_line().map_err(|e| format!("cannot read the password: {e}"))?;
        eprintln!();
        password
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the password: {e}"))?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    };
    let changed = kubedav_auth::passwd::set_password(file, user, &password)?;
    Ok(format!(
        "{} {user} in {}",
        if changed { "changed" } else { "added" },
        file.display()
    ))
}

/// Reads one line from the terminal with echo off.
fn read_hidden_line() -> std::io::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let original = tcgetattr(&stdin)?;
    let mut silent = original.clone();
    silent.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &silent)?;
    let mut line = String::new();
    let result = std::io::BufRead::read_line(&mut stdin.lock(), &mut line);
    tcsetattr(&stdin, OptionalActions::Now, &original)?;
    result?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// `kubedav convert FILE`.
fn convert(file: &std::path::Path, content_type: &str, options: &kubedav_markdown::Options) -> ExitCode {
    use std::io::{Read, Write};
    let mut html = Vec::new();
    let read = if file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut html).map(|_| ())
    } else {
        std::fs::read(file).map(|bytes| html = bytes)
    };
    if let Err(e) = read {
        eprintln!("kubedav convert: cannot read {}: {e}", file.display());
        return ExitCode::FAILURE;
    }
    match kubedav_markdown::convert(&html, content_type, options) {
        Ok(out) => {
            let _ = std::io::stdout().write_all(out.markdown.as_bytes());
            eprintln!("tokens: {}", out.tokens);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kubedav convert: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `kubedav await-folder`: checks once a second until `folder` is a directory.
fn await_folder(folder: &std::path::Path, timeout_seconds: u64) -> ExitCode {
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        if folder.is_dir() {
            return ExitCode::SUCCESS;
        }
        if timeout_seconds > 0 && started.elapsed().as_secs() >= timeout_seconds {
            eprintln!(
                "kubedav await-folder: {} did not appear within {timeout_seconds} s; is fileio running on this volume with it writable?",
                folder.display()
            );
            return ExitCode::FAILURE;
        }
        if !said {
            eprintln!(
                "kubedav await-folder: waiting for {} (fileio makes it when it starts)",
                folder.display()
            );
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
