//! kubeconfig files read and merged as client-go's loader reads and merges them
//! (`clientcmd.ClientConfigLoadingRules.Load`, `LoadFromFile`, `ResolveLocalPaths`):
//!
//! - A file is its first YAML document (UTF-8, or UTF-16 with a byte order mark); an empty file
//!   is an empty kubeconfig. A name given twice in one file's `clusters`, `users` or `contexts`
//!   is an error, as client-go's conversion makes it.
//! - Relative `certificate-authority`, `client-certificate`, `client-key` and `tokenFile` paths
//!   (and an exec plugin's `command` that contains a `/`) are resolved against the folder of the
//!   file that names them, each file its own. Empty paths stay empty.
//! - An empty string is an unset field, as in Go (`token: ""` is no token, `proxy-url: ""` no
//!   proxy).
//! - Several files (`KUBECONFIG`): listed once each, a file that does not exist is skipped (all
//!   missing is an error here; client-go then has no configuration), the first file that defines
//!   a cluster, user or context name wins it whole, and the first non-empty `current-context`
//!   wins. Files of different `kind`/`apiVersion` merge (kube-rs refuses; client-go does not).
//!
//! Every entry remembers the file it came from, so that errors can name it. Reads files only.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use kube::config::{AuthInfo, Cluster, Kubeconfig};
use secrecy::ExposeSecret;

/// The merged kubeconfig and where each of its entries came from.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The merged kubeconfig.
    pub config: Kubeconfig,
    /// The file that defined each cluster.
    pub clusters: HashMap<String, PathBuf>,
    /// The file that defined each user.
    pub users: HashMap<String, PathBuf>,
    /// How many files were read.
    pub files: usize,
}

/// Why the kubeconfig files cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// One of several files is unusable: this names it.
    #[error("{}: {problem}", file.display())]
    InFile {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        problem: FileError,
    },
    /// The only file is unusable (the error's origin names it).
    #[error(transparent)]
    File(FileError),
    /// None of the files listed in `KUBECONFIG` exists.
    #[error("none of these files exists")]
    NoFile,
}

/// What is wrong with one kubeconfig file. Causes are written into the text, not returned as
/// `source()`.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It cannot be read.
    #[error("cannot read: {0}")]
    Read(io::Error),
    /// It is not a kubeconfig.
    #[error("not a kubeconfig: {0}")]
    Parse(Box<serde_saphyr::Error>),
    /// A name is defined twice in one of its lists.
    #[error("{list} defines {name:?} twice")]
    Duplicate {
        /// `clusters`, `users` or `contexts`.
        list: &'static str,
        /// The name.
        name: String,
    },
}

/// Loads `paths`, merged. `explicit`: one file named by the configuration, which must exist;
/// otherwise the files of `KUBECONFIG`, of which missing ones are skipped.
pub fn load(paths: &[PathBuf], explicit: bool) -> Result<Loaded, LoadError> {
    let mut seen = HashSet::new();
    let paths: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| !p.as_os_str().is_empty() && seen.insert(*p))
        .collect();
    let mut loaded = Loaded::default();
    for path in paths.iter().copied() {
        let config = match read_file(path) {
            Ok(c) => c,
            Err(FileError::Read(e)) if !explicit && e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!(file = %path.display(), "KUBECONFIG lists a file that does not exist: skipped");
                continue;
            }
            Err(problem) if paths.len() > 1 => {
                return Err(LoadError::InFile {
                    file: path.clone(),
                    problem,
                });
            }
            Err(problem) => return Err(LoadError::File(problem)),
        };
        merge(&mut loaded, config, path);
        loaded.files += 1;
    }
    if loaded.files == 0 {
        return Err(LoadError::NoFile);
    }
    Ok(loaded)
}

/// One file: its first document, its names checked, its paths resolved, empty strings unset.
pub fn read_file(path: &Path) -> Result<Kubeconfig, FileError> {
    let bytes = std::fs::read(path).map_err(FileError::Read)?;
    let mut reader = bytes.as_slice();
    let mut config = match serde_saphyr::read::<_, Kubeconfig>(&mut reader).next() {
        None => Kubeconfig::default(),
        Some(Ok(c)) => c,
        Some(Err(e)) => return Err(FileError::Parse(Box::new(e))),
    };
    let duplicate = |list, name: &str| FileError::Duplicate {
        list,
        name: name.to_string(),
    };
    if let Some(n) = first_duplicate(config.clusters.iter().map(|c| &c.name)) {
        return Err(duplicate("clusters", n));
    }
    if let Some(n) = first_duplicate(config.auth_infos.iter().map(|c| &c.name)) {
        return Err(duplicate("users", n));
    }
    if let Some(n) = first_duplicate(config.contexts.iter().map(|c| &c.name)) {
        return Err(duplicate("contexts", n));
    }
    let dir = folder_of(path);
    for c in config
        .clusters
        .iter_mut()
        .filter_map(|n| n.cluster.as_mut())
    {
        unset_empty_cluster(c);
        resolve(&mut c.certificate_authority, &dir);
    }
    for u in config
        .auth_infos
        .iter_mut()
        .filter_map(|n| n.auth_info.as_mut())
    {
        unset_empty_user(u);
        resolve(&mut u.client_certificate, &dir);
        resolve(&mut u.client_key, &dir);
        resolve(&mut u.token_file, &dir);
        if let Some(exec) = &mut u.exec
            && exec
                .command
                .as_deref()
                .is_some_and(|c| c.contains(std::path::MAIN_SEPARATOR))
        {
            resolve(&mut exec.command, &dir);
        }
    }
    if config.current_context.as_deref() == Some("") {
        config.current_context = None;
    }
    Ok(config)
}

fn first_duplicate<'a>(names: impl Iterator<Item = &'a String>) -> Option<&'a str> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .find(|n| !seen.insert(*n))
        .map(String::as_str)
}

/// The absolute folder of `file` (client-go: `filepath.Abs(filepath.Dir(file))`).
fn folder_of(file: &Path) -> PathBuf {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// A relative, non-empty path made relative to `dir`.
fn resolve(path: &mut Option<String>, dir: &Path) {
    if let Some(p) = path.as_mut()
        && !p.is_empty()
        && Path::new(p.as_str()).is_relative()
    {
        *p = dir.join(p.as_str()).to_string_lossy().into_owned();
    }
}

fn unset_empty(v: &mut Option<String>) {
    if v.as_deref() == Some("") {
        *v = None;
    }
}

fn unset_empty_cluster(c: &mut Cluster) {
    for v in [
        &mut c.server,
        &mut c.certificate_authority,
        &mut c.certificate_authority_data,
        &mut c.proxy_url,
        &mut c.tls_server_name,
    ] {
        unset_empty(v);
    }
}

fn unset_empty_user(u: &mut AuthInfo) {
    for v in [
        &mut u.username,
        &mut u.token_file,
        &mut u.client_certificate,
        &mut u.client_certificate_data,
        &mut u.client_key,
        &mut u.impersonate,
    ] {
        unset_empty(v);
    }
    if u.token
        .as_ref()
        .is_some_and(|t| t.expose_secret().is_empty())
    {
        u.token = None;
    }
    if u.password
        .as_ref()
        .is_some_and(|t| t.expose_secret().is_empty())
    {
        u.password = None;
    }
    if u.client_key_data
        .as_ref()
        .is_some_and(|t| t.expose_secret().is_empty())
    {
        u.client_key_data = None;
    }
}

/// Merges `next` (read from `file`) under what `loaded` already has: names it defines first win.
fn merge(loaded: &mut Loaded, next: Kubeconfig, file: &Path) {
    let merged = &mut loaded.config;
    for c in next.clusters {
        if !loaded.clusters.contains_key(&c.name) {
            loaded.clusters.insert(c.name.clone(), file.to_path_buf());
            merged.clusters.push(c);
        }
    }
    for u in next.auth_infos {
        if !loaded.users.contains_key(&u.name) {
            loaded.users.insert(u.name.clone(), file.to_path_buf());
            merged.auth_infos.push(u);
        }
    }
    for c in next.contexts {
        if !merged.contexts.iter().any(|m| m.name == c.name) {
            merged.contexts.push(c);
        }
    }
    if merged.current_context.is_none() {
        merged.current_context = next.current_context;
    }
    if merged.preferences.is_none() {
        merged.preferences = next.preferences;
    }
    if merged.extensions.is_none() {
        merged.extensions = next.extensions;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn cluster<'a>(l: &'a Loaded, name: &str) -> &'a Cluster {
        l.config
            .clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.as_ref())
            .unwrap()
    }

    const ONE: &str = r#"
apiVersion: v1
kind: Config
current-context: ""
clusters:
- name: shared
  cluster: {server: "https://one:6443", certificate-authority: ca.crt}
- name: only-one
  cluster: {server: "https://one-only:6443", certificate-authority: /abs/ca.crt}
users:
- name: me
  user: {client-certificate: certs/me.crt, client-key: certs/me.key, token: ""}
contexts:
- name: a
  context: {cluster: shared, user: me}
"#;

    const TWO: &str = r#"
current-context: b
clusters:
- name: shared
  cluster: {server: "https://two:6443", tls-server-name: two}
- name: only-two
  cluster: {server: "https://two-only:6443", certificate-authority: ../two-ca.crt}
users:
- name: me
  user: {token: from-two}
- name: other
  user: {tokenFile: token}
contexts:
- name: a
  context: {cluster: only-two}
- name: b
  context: {cluster: shared, user: other}
"#;

    /// client-go's rules: first file wins a name whole, the first non-empty current-context
    /// wins, paths resolve against each file's own folder, missing files are skipped.
    #[test]
    fn files_merge_as_client_go_merges_them() {
        let d = tempfile::tempdir().unwrap();
        let one = write(d.path(), "one/config", ONE);
        let two = write(d.path(), "two/sub/config", TWO);
        let missing = d.path().join("missing");
        let l = load(
            &[missing.clone(), one.clone(), two.clone(), one.clone()],
            false,
        )
        .unwrap();
        assert_eq!(l.files, 2);
        // "" in the first file sets nothing: the second file's current-context wins.
        assert_eq!(l.config.current_context.as_deref(), Some("b"));
        let shared = cluster(&l, "shared");
        assert_eq!(shared.server.as_deref(), Some("https://one:6443"));
        // Whole entries: nothing of the second file's "shared" (its tls-server-name) is kept.
        assert_eq!(shared.tls_server_name, None);
        let one_dir = std::path::absolute(d.path().join("one")).unwrap();
        let two_dir = std::path::absolute(d.path().join("two/sub")).unwrap();
        assert_eq!(
            shared.certificate_authority.as_deref(),
            Some(one_dir.join("ca.crt").to_str().unwrap())
        );
        assert_eq!(
            cluster(&l, "only-one").certificate_authority.as_deref(),
            Some("/abs/ca.crt")
        );
        assert_eq!(
            cluster(&l, "only-two").certificate_authority.as_deref(),
            Some(two_dir.join("../two-ca.crt").to_str().unwrap())
        );
        let user = |n: &str| {
            l.config
                .auth_infos
                .iter()
                .find(|u| u.name == n)
                .and_then(|u| u.auth_info.clone())
                .unwrap()
        };
        let me = user("me");
        assert_eq!(
            me.client_key.as_deref(),
            Some(one_dir.join("certs/me.key").to_str().unwrap())
        );
        // `token: ""` is no token, and the second file's "me" (a token) is not merged in.
        assert!(me.token.is_none());
        assert_eq!(
            user("other").token_file.as_deref(),
            Some(two_dir.join("token").to_str().unwrap())
        );
        let ctx: Vec<_> = l
            .config
            .contexts
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.context.as_ref().unwrap().cluster.as_str(),
                )
            })
            .collect();
        assert_eq!(ctx, [("a", "shared"), ("b", "shared")]);
        assert_eq!(l.clusters["shared"], one);
        assert_eq!(l.clusters["only-two"], two);
        assert_eq!(l.users["me"], one);
        assert_eq!(l.users["other"], two);

        // Missing files are skipped, but not all of them; one named by the config must exist.
        assert!(matches!(
            load(std::slice::from_ref(&missing), false),
            Err(LoadError::NoFile)
        ));
        let e = load(std::slice::from_ref(&missing), true).unwrap_err();
        assert!(matches!(&e, LoadError::File(FileError::Read(_))), "{e}");
        // Of several files, the error names the one at fault.
        let bad = write(d.path(), "bad", "clusters: [oops");
        let e = load(&[one.clone(), bad.clone()], false).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}: not a kubeconfig: ", bad.display())),
            "{e}"
        );
    }

    #[test]
    fn a_file_is_its_first_document() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "config",
            "current-context: first\n---\ncurrent-context: second\nclusters: [{name: x}]\n",
        );
        let c = read_file(&p).unwrap();
        assert_eq!(c.current_context.as_deref(), Some("first"));
        assert!(c.clusters.is_empty());
        let empty = write(d.path(), "empty", "");
        assert!(read_file(&empty).unwrap().clusters.is_empty());
    }

    #[test]
    fn a_name_twice_in_one_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "config",
            "users:\n- name: u\n  user: {token: a}\n- name: u\n  user: {token: b}\n",
        );
        let e = read_file(&p).unwrap_err().to_string();
        assert_eq!(e, "users defines \"u\" twice");
    }

    #[test]
    fn empty_and_absolute_paths_are_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "config",
            "clusters:\n- name: c\n  cluster: {server: 'https://x', certificate-authority: ''}\nusers:\n- name: u\n  user: {exec: {command: aws, apiVersion: v1}}\n- name: v\n  user: {exec: {command: bin/plugin, apiVersion: v1}}\n",
        );
        let c = read_file(&p).unwrap();
        let cluster = c.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority, None);
        let cmd = |i: usize| {
            c.auth_infos[i]
                .auth_info
                .as_ref()
                .unwrap()
                .exec
                .as_ref()
                .unwrap()
                .command
                .clone()
                .unwrap()
        };
        assert_eq!(cmd(0), "aws");
        assert_eq!(cmd(1), folder_of(&p).join("bin/plugin").to_string_lossy());
    }
}
