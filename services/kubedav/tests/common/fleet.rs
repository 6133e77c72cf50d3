//! Two gateways over one storage, as replicas run: each a whole process sharing locks
//! through Redis (all-in-one), or each with an auth of its own beside one fileio and one
//! locks (microservices). The storage is the suite's backend: a volume, or a bucket.

use super::{Backend, Mode, Process, start_gateway, start_service};
use std::net::SocketAddr;
use std::path::Path;

/// The processes of a [`fleet`], and where to reach them.
pub(crate) struct Fleet {
    /// Every process, in start order (restart them all to restart the fleet).
    pub processes: Vec<Process>,
    /// The two gateways' URLs (`http://addr`).
    pub gateways: [String; 2],
    /// The admin addresses of the processes that verify credentials for each gateway
    /// (the all-in-one process, or that gateway's auth).
    pub auth_admins: [SocketAddr; 2],
    /// The admin addresses of the processes that serve the storage (both all-in-one
    /// processes, or the one fileio).
    pub fileio_admins: Vec<SocketAddr>,
    /// Where the served tree is on disk: the root, or versitygw's directory of the prefix.
    root: std::path::PathBuf,
    s3: Option<kubedav_testkit::S3Server>,
}

impl Fleet {
    /// The file or folder `relative` of the served tree, on disk.
    pub(crate) fn disk(&self, relative: &str) -> std::path::PathBuf {
        self.root.join(relative)
    }

    /// The multipart uploads under way in the bucket (none on a volume).
    pub(crate) async fn multipart_uploads(&self) -> usize {
        match &self.s3 {
            Some(s3) => super::bucket_client(s3).uploads("").await.unwrap().len(),
            None => 0,
        }
    }
}

/// Starts a fleet with `envs` (the Redis URL, users, policy, identity provider: whatever
/// the test needs) for every process, and a root or bucket of its own in `dir`.
pub(crate) async fn fleet(mode: Mode, mut envs: Vec<(String, String)>, dir: &Path) -> Fleet {
    let (s3, root) = match super::backend() {
        Backend::Volume => {
            let root = dir.join("root");
            std::fs::create_dir_all(&root).unwrap();
            envs.push(("KUBEDAV_ROOT".into(), root.display().to_string()));
            (None, root)
        }
        _ => {
            let s3 = kubedav_testkit::S3Server::start("files");
            envs.extend(super::s3_envs(&s3));
            envs.push(("KUBEDAV_STORAGE".into(), format!("s3://{}/fleet", s3.bucket())));
            let root = s3.bucket_dir().join("fleet");
            (Some(s3), root)
        }
    };
    let mut processes = Vec::new();
    let mut gateways = Vec::new();
    let mut auth_admins = Vec::new();
    let mut fileio_admins = Vec::new();
    match mode {
        Mode::AllInOne => {
            for name in ["all-a", "all-b"] {
                let args: Vec<String> = ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]
                    .map(String::from)
                    .to_vec();
                let mut process = Process::spawn(name, &args, &envs);
                gateways.push(process.listening("gateway HTTP").await);
                let admin = process.listening("all admin").await;
                auth_admins.push(admin);
                fileio_admins.push(admin);
                processes.push(process);
            }
        }
        Mode::Microservices => {
            let (fileio, fileio_grpc, fileio_admin) = start_service("fileio", "fileio", &[], &envs).await;
            fileio_admins.push(fileio_admin);
            let (locks, locks_grpc, _) = start_service("locks", "locks", &[], &envs).await;
            processes.extend([fileio, locks]);
            let fileio_url = format!("http://{fileio_grpc}");
            for (auth_name, gateway_name) in [("auth-a", "gateway-a"), ("auth-b", "gateway-b")] {
                let (auth, auth_grpc, auth_admin) = start_service(
                    auth_name,
                    "auth",
                    &["--fileio-url".into(), fileio_url.clone()],
                    &envs,
                )
                .await;
                let args = [
                    "--fileio-url".to_owned(),
                    fileio_url.clone(),
                    "--locks-url".into(),
                    format!("http://{locks_grpc}"),
                    "--auth-url".into(),
                    format!("http://{auth_grpc}"),
                    "--markdown-url".into(),
                    String::new(),
                ];
                let (gateway, http, _) = start_gateway(gateway_name, &args, &envs).await;
                gateways.push(http);
                auth_admins.push(auth_admin);
                processes.extend([auth, gateway]);
            }
        }
    }
    let url = |addr: SocketAddr| format!("http://{addr}");
    Fleet {
        processes,
        gateways: [url(gateways[0]), url(gateways[1])],
        auth_admins: [auth_admins[0], auth_admins[1]],
        fileio_admins,
        root,
        s3,
    }
}
